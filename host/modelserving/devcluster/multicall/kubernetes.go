// kube-apiserver, kube-controller-manager and kube-scheduler, as their main packages in
// k8s.io/kubernetes/cmd run them.
package main

import (
	_ "time/tzdata" // CronJob time zones (kube-apiserver, kube-controller-manager)

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
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
}
