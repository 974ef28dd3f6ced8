package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/cilium/cilium/pkg/aws/metadata"
	"github.com/cilium/cilium/pkg/defaults"
	"github.com/cilium/cilium/pkg/time"
)

type metadataInfo = metadata.MetaDataInfo

// cilium-operator's flag defaults at v1.20.2 for what the peer does not take on its command line.
// From operator/pkg/ipam/aws.go (awsDefaultConfig):
const (
	awsReleaseExcessIPs          = false           // --aws-release-excess-ips
	excessIPReleaseDelay         = 180             // --excess-ip-release-delay (seconds)
	awsEnablePrefixDelegation    = false           // --aws-enable-prefix-delegation
	awsUsePrimaryAddress         = false           // --aws-use-primary-address
	awsMaxResultsPerCall         = int32(0)        // --aws-max-results-per-call (0: EC2 decides)
	eniGarbageCollectionInterval = 5 * time.Minute // --eni-gc-interval
)

// eniGarbageCollectionTags is what AllocatorAWS.initENIGarbageCollectionTags settles on with the
// defaults (no --eni-gc-tags, --cluster-name "default") when the host is not an EKS node: the
// managed tag and the default cluster name. The operator also adds them to every ENI it creates.
func eniGarbageCollectionTags() map[string]string {
	return map[string]string{
		defaults.ENIGarbageCollectionTagManagedName: defaults.ENIGarbageCollectionTagManagedValue,
		defaults.ENIGarbageCollectionTagClusterName: defaults.ENIGarbageCollectionTagClusterValue,
	}
}

// cilium-operator's flag defaults at v1.20.2 for what the peer does take on its command line.
const (
	// operator/pkg/ipam/cell.go (defaultConfig).
	defaultParallelAllocWorkers = 50  // --parallel-alloc-workers
	defaultLimitIPAMAPIBurst    = 20  // --limit-ipam-api-burst
	defaultLimitIPAMAPIQPS      = 4.0 // --limit-ipam-api-qps
	// operator/cmd/root.go (OperatorK8sClientQPS, OperatorK8sClientBurst).
	operatorK8sClientQPS   = 100.0 // --operator-k8s-client-qps
	operatorK8sClientBurst = 200   // --operator-k8s-client-burst
)

type settings struct {
	kubernetesURL        string
	kubernetesCAFile     string
	kubernetesToken      string
	ec2Endpoint          string
	region               string
	accessKeyID          string
	secretAccessKey      string
	hostVpcID            string
	parallelAllocWorkers int64
	limitIPAMAPIQPS      float64
	limitIPAMAPIBurst    int
	logLevel             slog.Level
}

// parseSettings reads the command line; the secrets come from the environment
// (OPERATOR_PEER_KUBERNETES_TOKEN, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) so they stay off it.
func parseSettings(args []string, getenv func(string) string) (settings, error) {
	s := settings{
		kubernetesToken: getenv("OPERATOR_PEER_KUBERNETES_TOKEN"),
		accessKeyID:     getenv("AWS_ACCESS_KEY_ID"),
		secretAccessKey: getenv("AWS_SECRET_ACCESS_KEY"),
	}
	flags := flag.NewFlagSet("operator-peer", flag.ContinueOnError)
	flags.StringVar(&s.kubernetesURL, "kubernetes-url", "", "kube-apiserver URL, https://127.0.0.1:PORT")
	flags.StringVar(&s.kubernetesCAFile, "kubernetes-ca-file", "", "the CA (or serving certificate) kube-apiserver's certificate chains to")
	flags.StringVar(&s.ec2Endpoint, "ec2-endpoint", "", "the EC2 stand-in, http://127.0.0.1:PORT")
	flags.StringVar(&s.region, "region", "", "the AWS Region the EC2 client signs for")
	flags.StringVar(&s.hostVpcID, "host-vpc-id", "", "the VPC of the host the operator runs on (what IMDS would answer)")
	flags.Int64Var(&s.parallelAllocWorkers, "parallel-alloc-workers", defaultParallelAllocWorkers, "cilium-operator's --parallel-alloc-workers")
	flags.Float64Var(&s.limitIPAMAPIQPS, "limit-ipam-api-qps", defaultLimitIPAMAPIQPS, "cilium-operator's --limit-ipam-api-qps")
	flags.IntVar(&s.limitIPAMAPIBurst, "limit-ipam-api-burst", defaultLimitIPAMAPIBurst, "cilium-operator's --limit-ipam-api-burst")
	debug := flags.Bool("debug", false, "log at debug level")
	if err := flags.Parse(args); err != nil {
		return settings{}, err
	}
	if *debug {
		s.logLevel = slog.LevelDebug
	}
	return s, s.validate()
}

func (s settings) validate() error {
	var problems []string
	for name, endpoint := range map[string]string{"--kubernetes-url": s.kubernetesURL, "--ec2-endpoint": s.ec2Endpoint} {
		if err := loopbackURL(endpoint); err != nil {
			problems = append(problems, fmt.Sprintf("%s %q: %v", name, endpoint, err))
		}
	}
	required := map[string]string{
		"--kubernetes-ca-file": s.kubernetesCAFile, "--region": s.region, "--host-vpc-id": s.hostVpcID,
		"OPERATOR_PEER_KUBERNETES_TOKEN": s.kubernetesToken, "AWS_ACCESS_KEY_ID": s.accessKeyID,
		"AWS_SECRET_ACCESS_KEY": s.secretAccessKey,
	}
	for name, value := range required {
		if value == "" {
			problems = append(problems, name+" is required")
		}
	}
	if s.limitIPAMAPIQPS <= 0 || s.limitIPAMAPIBurst < 1 || s.parallelAllocWorkers < 1 {
		problems = append(problems, "--limit-ipam-api-qps must be above 0, --limit-ipam-api-burst and --parallel-alloc-workers at least 1")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// loopbackURL accepts only URLs on 127.0.0.0/8 or localhost: the peer never leaves the machine.
func loopbackURL(raw string) error {
	parsed, err := url.Parse(raw)
	if err != nil || parsed.Host == "" {
		return errors.New("not an absolute URL")
	}
	host := parsed.Hostname()
	if host != "localhost" && !strings.HasPrefix(host, "127.") {
		return errors.New("not a loopback address")
	}
	return nil
}
