// kubectl, as k8s.io/kubernetes/cmd/kubectl runs it.
package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // the auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func init() {
	register("kubectl", func() int {
		_, _ = logs.GlogSetter(cmd.GetLogVerbosity(os.Args))
		if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
			util.CheckErr(err)
		}
		return 0
	})
}
