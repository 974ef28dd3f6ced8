module serverless-eni-ipam.invalid/peers/agent-report

go 1.17
