// kubectl, built from the published k8s.io/kubectl module at the release the Kubernetes peer pins,
// for the local cloud's person and the tests that drive kubectl against it. This main is what
// k8s.io/kubernetes/cmd/kubectl does.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// -v is read before the command is built, so klog logs at that level while it is built.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) //nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
