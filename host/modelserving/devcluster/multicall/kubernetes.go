// kube-apiserver, kube-controller-manager, kube-scheduler and kubectl, as their main packages
// in k8s.io/kubernetes/cmd run them.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones (kube-apiserver, kube-controller-manager)

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func init() {
	register("kube-apiserver", func() int { return cli.Run(apiserver.NewAPIServerCommand()) })
	register("kube-controller-manager", func() int {
		return cli.Run(controllermanager.NewControllerManagerCommand())
	})
	register("kube-scheduler", func() int { return cli.Run(scheduler.NewSchedulerCommand()) })
	register("kubectl", func() int {
		_, _ = logs.GlogSetter(kubectl.GetLogVerbosity(os.Args))
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return 0
	})
}
