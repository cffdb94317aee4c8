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
	"strconv"
	"time"
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
		startupGC()
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

// startupGC: kube-apiserver's start (the CRDs' structural schemas, validators, OpenAPI specs and serving info,
// built again for every plane) allocates several times its live heap, and at the children's GOGC=50 (run.go says
// why) its garbage collector took 43 % of a start's CPU in a profile of a snapshot-restored plane (mark workers 24 %,
// assists 19 %). For its first KCP_START_GC_SECONDS (default 120) the collector runs only near a soft limit of
// KCP_START_GOMEMLIMIT_MIB (default 1600), then the steady settings (GOGC, GOMEMLIMIT from the environment) come
// back and the heap is collected and returned to the system at once, so the memory the steady setting keeps low is
// only spent while a plane starts (tests/bench/test_controlplane_bench.py prints both). KCP_START_GC_SECONDS=0 turns
// it off.
func startupGC() {
	secs := 120.0
	if v := os.Getenv("KCP_START_GC_SECONDS"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			secs = f
		}
	}
	if secs <= 0 {
		return
	}
	limit := int64(1600 << 20)
	if v := os.Getenv("KCP_START_GOMEMLIMIT_MIB"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			limit = n << 20 // MiB
		}
	}
	steadyLimit := debug.SetMemoryLimit(-1) // -1 reads it: GOMEMLIMIT, or math.MaxInt64 when unset
	if steadyLimit < limit {
		return // a tighter limit was asked for: keep it
	}
	steadyPercent := debug.SetGCPercent(-1)
	debug.SetMemoryLimit(limit)
	time.AfterFunc(time.Duration(secs*float64(time.Second)), func() {
		debug.SetGCPercent(steadyPercent)
		debug.SetMemoryLimit(steadyLimit)
		debug.FreeOSMemory() // collect now and hand back what the start held, not when the scavenger gets to it
	})
}

func usage() {
	os.Stderr.WriteString("usage: kcp run|apiserver|controller-manager|scheduler|kubectl [args...]\n")
	os.Exit(2)
}
