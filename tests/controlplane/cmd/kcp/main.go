// Command kcp is the local control plane of the test suite: one binary holding
// kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from the published
// Kubernetes Go modules, an embedded etcd, and a small supervisor ("kcp run") that wires them up.
//
//	kcp run --dir D --port P ...   start etcd (in process), kube-apiserver,
//	                               kube-controller-manager and kube-scheduler (child
//	                               processes), install the CRD bundle, serve the
//	                               PackageManifest aggregated API, write D/kubeconfig, print
//	                               one READY line, run until SIGTERM/SIGINT, then stop
//	                               everything it started.
//	kcp apiserver ARGS...          kube-apiserver (k8s.io/kubernetes/cmd/kube-apiserver/app)
//	kcp controller-manager ARGS... kube-controller-manager
//	kcp scheduler ARGS...          kube-scheduler (k8s.io/kubernetes/cmd/kube-scheduler/app)
//	kcp kubectl ARGS...            kubectl (also when the binary is invoked as "kubectl")
package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name != "kubectl" {
		if len(args) == 0 {
			usage()
		}
		name, args = args[0], args[1:]
	}
	os.Args = append([]string{name}, args...)
	switch name {
	case "run":
		debug.SetGCPercent(50)
		os.Exit(runMain(args))
	case "apiserver":
		c := apiserver.NewAPIServerCommand()
		c.SetArgs(args)
		os.Exit(cli.Run(c))
	case "controller-manager":
		c := kcm.NewControllerManagerCommand()
		c.SetArgs(args)
		os.Exit(cli.Run(c))
	case "scheduler":
		c := scheduler.NewSchedulerCommand()
		c.SetArgs(args)
		os.Exit(cli.Run(c))
	case "kubectl":
		c := kubectlcmd.NewDefaultKubectlCommand()
		c.SetArgs(args)
		os.Exit(cli.Run(c))
	default:
		usage()
	}
}

func usage() {
	os.Stderr.WriteString("usage: kcp run|apiserver|controller-manager|scheduler|kubectl [args...]\n")
	os.Exit(2)
}
