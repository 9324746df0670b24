// kwok, as sigs.k8s.io/kwok/cmd/kwok runs it.
package main

import (
	"os"

	"github.com/spf13/pflag"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

func init() {
	register("kwok", func() int {
		// cobra adds pflag.CommandLine to every command, and in this bundle Kubernetes'
		// packages have put their own --version there (a non-bool flag cobra refuses beside a
		// command's Version). kwok's own binary has none of them: it gets an empty set too.
		pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
		flags := pflag.NewFlagSet("global", pflag.ContinueOnError)
		flags.ParseErrorsWhitelist.UnknownFlags = true
		flags.Usage = func() {}
		ctx := signals.SetupSignalContext()
		ctx, logger := log.InitFlags(ctx, flags)
		ctx, err := config.InitFlags(ctx, flags)
		if err != nil {
			_, _ = os.Stderr.Write([]byte(flags.FlagUsages()))
			logger.Error("Init config flags", err)
			return 1
		}
		command := cmd.NewCommand(ctx)
		command.PersistentFlags().AddFlagSet(flags)
		if err := command.ExecuteContext(ctx); err != nil {
			logger.Error("Execute exit", err)
			return 1
		}
		return 0
	})
}
