// Command agent-peer runs cilium-agent 1.11's own IPAM (k8s.Init, then ipam.NewIPAM in ENI mode:
// the CRD allocator) for one node against a real kube-apiserver, as the consumer of the CiliumNode
// that cilium-operator, or whatever stands in for it, publishes. NewIPAM blocks, as in the agent,
// until spec.ipam.pool holds enough IPs and status.eni.enis a VPC CIDR; then the router, health and
// pod IPs are allocated and every outcome is reported as agentreport describes. This release has no
// check of the CiliumNode before it allocates: an IP of the pool whose ENI is missing from
// status.eni.enis fails with "unable to find ENI".
//
// What is not cilium's: the flags below (the agent's own --k8s-kubeconfig-path and node name), an
// MTU of 9001, and a node-discovery owner that does nothing (the test creates the CiliumNode, as the
// agent's node discovery would). cilium's log records (logrus) go to stderr and, at info and above,
// to stdout as events.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/sirupsen/logrus"

	"github.com/cilium/cilium/pkg/defaults"
	"github.com/cilium/cilium/pkg/ipam"
	ipamOption "github.com/cilium/cilium/pkg/ipam/option"
	"github.com/cilium/cilium/pkg/k8s"
	"github.com/cilium/cilium/pkg/logging"
	nodeTypes "github.com/cilium/cilium/pkg/node/types"
	"github.com/cilium/cilium/pkg/option"

	"serverless-eni-ipam.invalid/peers/agent-report"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the agent's identity")
	nodeName := flag.String("node", "", "the CiliumNode (and Kubernetes node) name")
	pods := flag.Int("pods", 0, "pods to allocate an IP for after the router and health IPs")
	flag.Parse()
	if *kubeconfig == "" || *nodeName == "" || *pods < 0 {
		fmt.Fprintln(os.Stderr, "usage: agent-peer --kubeconfig PATH --node NAME [--pods N]")
		os.Exit(2)
	}
	logging.DefaultLogger.SetLevel(logrus.DebugLevel)
	logging.DefaultLogger.AddHook(reportingHook{})

	nodeTypes.SetName(*nodeName)
	option.Config.IPAM = ipamOption.IPAMENI
	option.Config.EnableIPv4 = true
	option.Config.EnableIPv6 = false
	option.Config.EnableHealthChecking = true
	option.Config.K8sKubeConfigPath = *kubeconfig
	k8s.Configure("", *kubeconfig, defaults.K8sClientQPSLimit, defaults.K8sClientBurst)
	if err := k8s.Init(option.Config); err != nil {
		fmt.Fprintln(os.Stderr, "k8s.Init:", err)
		os.Exit(1)
	}
	agentIPAM := ipam.NewIPAM(nil, option.Config, nodeDiscovery{}, eventRegister{}, mtu{})
	agentreport.Run(allocator{agentIPAM}, *pods, os.Stdin)
}

// allocator is the 1.11 agent's IPAM behind the shared reporting interface.
type allocator struct{ ipam *ipam.IPAM }

func (a allocator) AllocateNext(owner string, syncUpstream bool) (agentreport.Allocation, error) {
	allocate := a.ipam.AllocateNextFamilyWithoutSyncUpstream
	if syncUpstream {
		allocate = a.ipam.AllocateNextFamily
	}
	result, err := allocate(ipam.IPv4, owner)
	if err != nil {
		return agentreport.Allocation{}, err
	}
	return agentreport.Allocation{
		IP: result.IP.String(), MAC: result.PrimaryMAC, Interface: result.InterfaceNumber,
		Gateway: result.GatewayIP, CIDRs: result.CIDRs,
	}, nil
}

func (a allocator) Release(ip string) error {
	parsed := net.ParseIP(ip)
	if parsed == nil {
		return fmt.Errorf("invalid IP %q", ip)
	}
	return a.ipam.ReleaseIP(parsed)
}

// RestoreFinished is what the daemon calls once endpoints are restored (daemon/cmd/daemon.go): only
// then does the allocator write status.ipam.used.
func (a allocator) RestoreFinished() { a.ipam.IPv4Allocator.RestoreFinished() }

func (a allocator) Dump() map[string]string {
	allocated, _, _ := a.ipam.Dump()
	return allocated
}

// reportingHook reports every cilium log record at info or above as an event.
type reportingHook struct{}

func (reportingHook) Levels() []logrus.Level {
	return []logrus.Level{logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel, logrus.WarnLevel, logrus.InfoLevel}
}

func (reportingHook) Fire(entry *logrus.Entry) error {
	agentreport.Stdout.Log(entry.Level.String(), entry.Message, entry.Data)
	return nil
}

type nodeDiscovery struct{}

func (nodeDiscovery) UpdateCiliumNodeResource() {}

type eventRegister struct{}

func (eventRegister) K8sEventReceived(string, string, bool, bool) {}
func (eventRegister) K8sEventProcessed(string, string, bool)      {}

// mtu is the ENI's jumbo-frame MTU (what the agent would read from its devices).
type mtu struct{}

func (mtu) GetDeviceMTU() int { return 9001 }
