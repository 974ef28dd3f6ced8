// Command operator-peer runs cilium-operator's ENI allocator (cilium v1.20.2, pinned in go.mod) as
// the operator runs it, outside the operator's hive: the EC2 client of pkg/aws/api, the instances
// manager of pkg/aws/ipam, the node manager of operator/pkg/ipam/nodemanager, fed by a CiliumNode
// informer and writing through a getter/updater over cilium's generated clientset. Everything below
// the wiring is cilium's code. It differs from the operator in three places only, each stated where
// it is done: the EC2 endpoint is plain http with static credentials (the operator forces https and
// takes its region and credentials from IMDS), the operator host's instance metadata comes from the
// command line (there is no IMDS on loopback), and there is no Pod informer (the operator's surge
// allocation reads pending Pods; nil-safe, it then counts none).
//
// It prints one JSON line {"ready":true} on stdout once the initial EC2 resync is done and the
// CiliumNode informer has synced, then runs until SIGTERM or SIGINT. Logs go to stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	awsAllocator "github.com/cilium/cilium/operator/pkg/ipam/allocator/aws"
	ipamMetrics "github.com/cilium/cilium/operator/pkg/ipam/metrics"
	"github.com/cilium/cilium/operator/pkg/ipam/nodemanager"
	"github.com/cilium/cilium/pkg/aws/ipam"
	"github.com/cilium/cilium/pkg/defaults"
)

func main() {
	settings, err := parseSettings(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "operator-peer: %v\n", err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: settings.logLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, logger, settings); err != nil {
		logger.Error("operator-peer stopped", "error", err)
		os.Exit(1)
	}
}

// run mirrors AllocatorAWS.Init and AllocatorAWS.Start (operator/pkg/ipam/allocator/aws/aws.go)
// and the node watcher job (operator/pkg/ipam/nodewatcher.go).
func run(ctx context.Context, logger *slog.Logger, s settings) error {
	kube, err := newKubernetes(s)
	if err != nil {
		return err
	}
	ec2Client, err := newEC2Client(ctx, logger, s)
	if err != nil {
		return err
	}
	instances, err := ipam.NewInstancesManager(ctx, logger, ec2Client, hostMetadata{vpcID: s.hostVpcID})
	if err != nil {
		return fmt.Errorf("unable to initialize ENI instances manager: %w", err)
	}
	nodeManager, err := nodemanager.NewNodeManager(logger.With("subsys", "ipam-allocator-aws"), instances,
		kube.getterUpdater(), ipamMetrics.NewMetrics(), s.parallelAllocWorkers, awsReleaseExcessIPs,
		excessIPReleaseDelay, awsEnablePrefixDelegation)
	if err != nil {
		return fmt.Errorf("unable to initialize ENI node manager: %w", err)
	}
	if err := nodeManager.Start(ctx); err != nil {
		return err
	}
	defer nodeManager.Stop()
	if eniGarbageCollectionInterval > 0 {
		ipam.StartENIGarbageCollector(ctx, logger, ec2Client, ipam.GarbageCollectionParams{
			RunInterval:    eniGarbageCollectionInterval,
			MaxPerInterval: defaults.ENIGarbageCollectionMaxPerInterval,
			ENITags:        eniGarbageCollectionTags(),
		})
	}
	if err := kube.watchCiliumNodes(ctx, nodeManager); err != nil {
		return err
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]bool{"ready": true}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// The AWS EC2 client's metrics, as the operator registers them (operator/pkg/ipam/aws.go).
var ec2Metrics = awsAllocator.NewMetrics

// hostMetadata answers what the operator reads from IMDS about the host it runs on
// (pkg/aws/metadata): only the VPC ID is used, to scope the Describe calls to the cluster's VPC.
type hostMetadata struct{ vpcID string }

func (m hostMetadata) GetInstanceMetadata(context.Context) (metadataInfo, error) {
	return metadataInfo{VPCID: m.vpcID}, nil
}
