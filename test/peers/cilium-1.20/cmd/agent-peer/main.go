// Command agent-peer runs cilium-agent 1.20's own IPAM (ipam.NewIPAM, then ConfigureAllocator in
// ENI mode: the ENI multi-pool allocator) for one node against a real kube-apiserver, as the consumer
// of the CiliumNode that cilium-operator, or whatever stands in for it, publishes. ConfigureAllocator
// blocks, as in the agent, until the CiliumNode offers an allocatable IP and a VPC CIDR; then the
// router, health and pod IPs are allocated and every outcome is reported as agentreport describes.
//
// What is not cilium's: the process wiring (cilium's hive with its job group, and this node's
// CiliumNode resource built as daemon/k8s's local-node cell builds it), a Clientset that serves only
// CiliumV2 (the one group the ENI allocator calls), an MTU of 9001, an in-memory sysctl, and a
// node-discovery owner that does nothing (the test creates the CiliumNode, as the agent's node
// discovery would; the 1.20 ENI allocator never calls it). The ENI device configurator cilium starts
// looks for links with the ENIs' MACs, finds none on this host and gives up after its retries.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/spf13/afero"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/clientcmd"

	agentK8s "github.com/cilium/cilium/daemon/k8s"
	"github.com/cilium/cilium/pkg/datapath/linux/sysctl"
	"github.com/cilium/cilium/pkg/defaults"
	"github.com/cilium/cilium/pkg/hive"
	"github.com/cilium/cilium/pkg/ipam"
	ipamOption "github.com/cilium/cilium/pkg/ipam/option"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium/cilium/pkg/k8s/client"
	"github.com/cilium/cilium/pkg/k8s/client/clientset/versioned"
	ciliumv2client "github.com/cilium/cilium/pkg/k8s/client/clientset/versioned/typed/cilium.io/v2"
	"github.com/cilium/cilium/pkg/k8s/resource"
	"github.com/cilium/cilium/pkg/k8s/utils"
	"github.com/cilium/cilium/pkg/node"
	nodeTypes "github.com/cilium/cilium/pkg/node/types"
	"github.com/cilium/cilium/pkg/option"

	"serverless-eni-ipam.invalid/peers/agent-report"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the agent's identity")
	nodeName := flag.String("node", "", "the CiliumNode (and Kubernetes node) name")
	pods := flag.Int("pods", 0, "pods to allocate an IP for after the router and health IPs")
	updateRate := flag.Duration("ciliumnode-update-rate", 15*time.Second,
		"the agent's --ipam-cilium-node-update-rate (debounce of its CiliumNode writes)")
	flag.Parse()
	if *kubeconfig == "" || *nodeName == "" || *pods < 0 {
		fmt.Fprintln(os.Stderr, "usage: agent-peer --kubeconfig PATH --node NAME [--pods N] [--ciliumnode-update-rate 15s]")
		os.Exit(2)
	}
	logger := slog.New(&reportingHandler{next: slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})})
	cilium, err := ciliumClient(*kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	configureAgent(*nodeName, *updateRate)
	localNode, jobs, stop := startHive(logger, cilium.CiliumV2().CiliumNodes(), *nodeName)
	defer stop()

	agentIPAM := ipam.NewIPAM(ipam.NewIPAMParams{
		Logger:         logger,
		AgentConfig:    option.Config,
		NodeDiscovery:  nodeDiscovery{},
		LocalNodeStore: node.NewTestLocalNodeStore(node.LocalNode{}),
		K8sEventReg:    eventRegister{},
		NodeResource:   localNode,
		MTUConfig:      mtu{},
		Clientset:      ciliumOnlyClientset{cilium: cilium},
		Sysctl:         sysctl.NewDirectSysctl(afero.NewMemMapFs(), "/proc"),
		JobGroup:       jobs,
	})
	agentIPAM.ConfigureAllocator()
	agentreport.Run(allocator{agentIPAM}, *pods, os.Stdin)
}

// configureAgent sets the agent's global configuration as its flags would for ENI IPAM, IPv4 only.
func configureAgent(nodeName string, updateRate time.Duration) {
	nodeTypes.SetName(nodeName)
	option.Config.IPAM = ipamOption.IPAMENI
	option.Config.EnableIPv4 = true
	option.Config.EnableIPv6 = false
	option.Config.IPAMCiliumNodeUpdateRate = updateRate
	option.Config.IPAMDefaultIPPool = defaults.IPAMDefaultIPPool
}

func ciliumClient(kubeconfig string) (versioned.Interface, error) {
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return versioned.NewForConfig(restConfig)
}

// startHive starts the job group and this node's CiliumNode resource the allocator runs on, built as
// daemon/k8s's local-node cell builds it: a resource over the CiliumNode list-watch, filtered to
// metadata.name on the server, and to the name again in the resource.
func startHive(logger *slog.Logger, nodes ciliumv2client.CiliumNodeInterface, nodeName string) (
	agentK8s.LocalCiliumNodeResource, job.Group, func(),
) {
	var localNode agentK8s.LocalCiliumNodeResource
	var jobs job.Group
	h := hive.New(
		cell.Provide(func(lc cell.Lifecycle) agentK8s.LocalCiliumNodeResource {
			lw := utils.ListerWatcherWithFields(
				utils.ListerWatcherFromTyped[*ciliumv2.CiliumNodeList](nodes),
				fields.ParseSelectorOrDie("metadata.name="+nodeName),
			)
			all := resource.New[*ciliumv2.CiliumNode](lc, lw, nil, resource.WithMetric("CiliumNode"))
			return resource.NewFilteringResource(all, func(cn *ciliumv2.CiliumNode) bool { return cn.Name == nodeName })
		}),
		cell.Invoke(func(localNode_ agentK8s.LocalCiliumNodeResource, jobs_ job.Group) {
			localNode, jobs = localNode_, jobs_
		}),
	)
	if err := h.Start(logger, context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "starting the hive:", err)
		os.Exit(1)
	}
	return localNode, jobs, func() { _ = h.Stop(logger, context.Background()) }
}

// allocator is the 1.20 agent's IPAM behind the shared reporting interface.
type allocator struct{ ipam *ipam.IPAM }

func (a allocator) AllocateNext(owner string, syncUpstream bool) (agentreport.Allocation, error) {
	allocate := a.ipam.AllocateNextFamilyWithoutSyncUpstream
	if syncUpstream {
		allocate = a.ipam.AllocateNextFamily
	}
	result, err := allocate(ipam.IPv4, owner, ipam.PoolDefault())
	if err != nil {
		return agentreport.Allocation{}, err
	}
	cidrs := make([]string, 0, len(result.CIDRs))
	for _, c := range result.CIDRs {
		cidrs = append(cidrs, c.String())
	}
	return agentreport.Allocation{
		IP: result.IP.String(), MAC: result.PrimaryMAC, Interface: result.InterfaceNumber,
		Gateway: result.GatewayIP.String(), CIDRs: cidrs,
	}, nil
}

func (a allocator) Release(ip string) error {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return err
	}
	return a.ipam.ReleaseIP(addr, ipam.PoolDefault())
}

func (a allocator) RestoreFinished() { a.ipam.RestoreFinished() }

func (a allocator) Dump() map[string]string {
	allocated, _, _ := a.ipam.Dump()
	return allocated
}

// reportingHandler passes every record to next (stderr) and reports those at INFO or above.
type reportingHandler struct {
	next  slog.Handler
	attrs []slog.Attr
}

func (h *reportingHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *reportingHandler) Handle(ctx context.Context, record slog.Record) error {
	if record.Level >= slog.LevelInfo {
		fields := map[string]any{}
		add := func(attr slog.Attr) bool {
			fields[attr.Key] = attr.Value.Resolve().Any()
			return true
		}
		for _, attr := range h.attrs {
			add(attr)
		}
		record.Attrs(add)
		agentreport.Stdout.Log(record.Level.String(), record.Message, fields)
	}
	return h.next.Handle(ctx, record)
}

func (h *reportingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &reportingHandler{h.next.WithAttrs(attrs), append(append([]slog.Attr{}, h.attrs...), attrs...)}
}

func (h *reportingHandler) WithGroup(name string) slog.Handler {
	return &reportingHandler{h.next.WithGroup(name), h.attrs}
}

// ciliumOnlyClientset is the agent's Clientset for the ENI allocator: it calls CiliumV2 only.
type ciliumOnlyClientset struct {
	client.Clientset
	cilium versioned.Interface
}

func (c ciliumOnlyClientset) CiliumV2() ciliumv2client.CiliumV2Interface { return c.cilium.CiliumV2() }

type nodeDiscovery struct{}

func (nodeDiscovery) UpdateCiliumNodeResource() {}

type eventRegister struct{}

func (eventRegister) K8sEventReceived(string, string, string, bool, bool) {}
func (eventRegister) K8sEventProcessed(string, string, bool)              {}

// mtu is the ENI's jumbo-frame MTU (what the agent would read from its devices).
type mtu struct{}

func (mtu) GetDeviceMTU() int { return 9001 }
