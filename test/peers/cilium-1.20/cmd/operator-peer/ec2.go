package main

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	operatorOption "github.com/cilium/cilium/operator/option"
	ec2shim "github.com/cilium/cilium/pkg/aws/api"
)

// newEC2Client is AllocatorAWS.Init with the configuration of pkg/aws/api.NewConfig (the SDK's
// standard retryer without its client-side rate limiter: cilium relies on its own limiter only),
// except that the Region and static credentials are given, not read from IMDS and the default
// chain, and the endpoint is the stand-in's plain-http URL instead of "https://" + --ec2-api-endpoint.
func newEC2Client(_ context.Context, logger *slog.Logger, s settings) (*ec2shim.Client, error) {
	cfg := aws.Config{
		Region:      s.region,
		Credentials: credentials.NewStaticCredentialsProvider(s.accessKeyID, s.secretAccessKey, ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.None })
		},
	}
	endpoint := s.ec2Endpoint
	client := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(endpoint) })
	// With ENI garbage collection on (the default), the GC tags are merged into the creation tags.
	eniCreationTags := ec2shim.MergeTags(nil, eniGarbageCollectionTags())
	return ec2shim.NewClient(logger, client, ec2Metrics(), s.limitIPAMAPIQPS, s.limitIPAMAPIBurst,
		ec2shim.NewSubnetsFilters(nil, nil), ec2shim.NewTagsFilter(operatorOption.Config.IPAMInstanceTags),
		eniCreationTags, awsUsePrimaryAddress, awsMaxResultsPerCall), nil
}
