// vc-scheduler and vc-controller-manager, as volcano.sh/volcano's cmd/scheduler and
// cmd/controller-manager run them. The controller manager is built with the PodGroup and Queue
// controllers only: the dev cluster runs no Volcano Jobs.
package main

import (
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseoptions "k8s.io/component-base/config/options"
	"k8s.io/klog/v2"

	controllers "volcano.sh/volcano/cmd/controller-manager/app"
	controlleroptions "volcano.sh/volcano/cmd/controller-manager/app/options"
	scheduler "volcano.sh/volcano/cmd/scheduler/app"
	scheduleroptions "volcano.sh/volcano/cmd/scheduler/app/options"
	"volcano.sh/volcano/pkg/controllers/framework"
	_ "volcano.sh/volcano/pkg/controllers/podgroup"
	_ "volcano.sh/volcano/pkg/controllers/queue"
	_ "volcano.sh/volcano/pkg/scheduler/actions"
	_ "volcano.sh/volcano/pkg/scheduler/plugins"
	_ "volcano.sh/volcano/pkg/scheduler/util/assert"
	commonutil "volcano.sh/volcano/pkg/util"
	"volcano.sh/volcano/pkg/version"
)

func init() {
	register("vc-scheduler", runVolcanoScheduler)
	register("vc-controller-manager", runVolcanoControllers)
}

func volcanoFlags() (*pflag.FlagSet, *time.Duration) {
	klog.InitFlags(nil)
	fs := pflag.CommandLine
	flush := fs.Duration("log-flush-frequency", 5*time.Second, "Maximum number of seconds between log flushes")
	return fs, flush
}

// runVolcano parses the flags, then checks the options and runs the program, as both of
// Volcano's main packages do after registering their own flags.
func runVolcano(flush *time.Duration, printVersion *bool, check, run func() error) int {
	cliflag.InitFlags()
	if *printVersion {
		version.PrintVersionAndExit()
	}
	if err := check(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	klog.StartFlushDaemon(*flush)
	defer klog.Flush()
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	return 0
}

func runVolcanoScheduler() int {
	fs, flush := volcanoFlags()
	s := scheduleroptions.NewServerOption()
	s.AddFlags(fs)
	utilfeature.DefaultMutableFeatureGate.AddFlag(fs)
	commonutil.LeaderElectionDefault(&s.LeaderElection)
	s.LeaderElection.ResourceName = commonutil.GenerateComponentName(s.SchedulerNames)
	componentbaseoptions.BindLeaderElectionFlags(&s.LeaderElection, fs)
	s.RegisterOptions()
	return runVolcano(flush, &s.PrintVersion, s.CheckOptionOrDie, func() error { return scheduler.Run(s) })
}

func runVolcanoControllers() int {
	fs, flush := volcanoFlags()
	s := controlleroptions.NewServerOption()
	var known []string
	framework.ForeachController(func(c framework.Controller) { known = append(known, c.Name()) })
	sort.Strings(known)
	s.AddFlags(fs, known)
	utilfeature.DefaultMutableFeatureGate.AddFlag(fs)
	commonutil.LeaderElectionDefault(&s.LeaderElection)
	s.LeaderElection.ResourceName = "vc-controller-manager"
	componentbaseoptions.BindLeaderElectionFlags(&s.LeaderElection, fs)
	return runVolcano(flush, &s.PrintVersion, s.CheckOptionOrDie, func() error { return controllers.Run(s) })
}
