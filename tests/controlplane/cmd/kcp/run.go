package main

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
)

// kcmControllers are the kube-controller-manager controllers kcp runs. Not the EndpointSlice
// controller: pod IPs are loopback addresses here (kwok_agent.py), which the API server refuses in
// an EndpointSlice; nothing here reads them (the endpoint picker lists the pool's pods itself).
var kcmControllers = []string{
	"namespace-controller", "garbage-collector-controller", "serviceaccount-controller",
	"serviceaccount-token-controller", "root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller",
	"deployment-controller", "replicaset-controller", "statefulset-controller",
	"daemonset-controller", "job-controller", "pod-garbage-collector-controller",
	// Binds PersistentVolumeClaims to the volumes made for them (artifacts.py: the pvc:// model
	// artifacts a site stages); nothing provisions volumes dynamically here.
	"persistentvolume-binder-controller",
	// Lift the protection finalizers the API server's admission puts on claims and volumes once no
	// pod uses them (else a namespace with a claim never finishes terminating).
	"persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
	// Removes the not-ready taint the API server's TaintNodesByCondition admission puts on every new
	// Node once kwok reports it Ready, and taints a node whose kwok Lease goes stale.
	"node-lifecycle-controller",
}

func controllers(hpa bool) []string {
	if hpa {
		return append(append([]string{}, kcmControllers...), "horizontal-pod-autoscaler-controller")
	}
	return kcmControllers
}

type runOpts struct {
	dir         string
	port        int
	etcdPort    int
	etcdPeer    int
	pkgPort     int
	crds        string
	catalog     string
	kcm         bool
	hpa         bool
	scheduler   bool
	schedPort   int
	snapCache   string
	conversions string
	readyTimout time.Duration
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000")+" kcp: "+format+"\n", a...)
}

func runMain(args []string) int {
	var o runOpts
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	fs.StringVar(&o.dir, "dir", ".cluster", "state directory (pki, etcd data, logs, kubeconfig)")
	fs.IntVar(&o.port, "port", 6443, "kube-apiserver secure port on 127.0.0.1")
	fs.IntVar(&o.etcdPort, "etcd-port", 2379, "etcd client port on 127.0.0.1")
	fs.IntVar(&o.etcdPeer, "etcd-peer-port", 2380, "etcd peer port on 127.0.0.1")
	fs.IntVar(&o.pkgPort, "packages-port", 5443, "PackageManifest API port on 127.0.0.1 (0: do not serve)")
	fs.StringVar(&o.crds, "crds", "", "JSON bundle of CRDs to install ({\"crds\": [...]}, see crdsources/collect.py)")
	fs.StringVar(&o.catalog, "catalog", "", "operator package catalog (YAML) served as PackageManifests")
	fs.BoolVar(&o.kcm, "controller-manager", true, "run kube-controller-manager")
	fs.BoolVar(&o.hpa, "hpa", false, "run kube-controller-manager's HPA controller (tests/autoscaling; else the simulator plays HPA status)")
	fs.BoolVar(&o.scheduler, "scheduler", true, "run kube-scheduler")
	fs.IntVar(&o.schedPort, "scheduler-port", 10259, "kube-scheduler secure port (healthz, metrics) on 127.0.0.1")
	fs.StringVar(&o.snapCache, "snapshot-cache", "", "directory for etcd snapshots taken right after the CRDs are established; "+
		"later starts with the same binary and CRD bundle restore it instead of creating every CRD again")
	fs.StringVar(&o.conversions, "crd-conversions", "", "JSON {CRD name: spec.conversion} set in the CRDs a snapshot "+
		"restores before kube-apiserver starts (conversions.go; an empty webhook caBundle gets the plane's CA)")
	fs.DurationVar(&o.readyTimout, "ready-timeout", 60*time.Second, "give up when not ready by then")
	_ = fs.Parse(args)
	if err := run(o); err != nil {
		logf("error: %v", err)
		return 1
	}
	return 0
}

type supervisor struct {
	mu       sync.Mutex
	children []*exec.Cmd
	exited   chan string
	// what each child was started with, and the children being restarted on purpose (their exit is not a death)
	started    map[string][]string
	restarting map[*exec.Cmd]bool
}

func (s *supervisor) spawn(name, logPath string, args ...string) error {
	return s.start(name, logPath, os.Create, args)
}

// start runs one child; open makes its log (a restarted child appends to the log of the one before).
func (s *supervisor) start(name, logPath string, open func(string) (*os.File, error), args []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logFile, err := open(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The children die with the supervisor, whatever kills it: nothing is left running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Memory: GOGC=50 keeps the heap of the children at 1.5x live instead of 2x. Measured
	// on one plane with KServe (idle 2-core machine): a snapshot-restored start took 50 CPU-s
	// at GOGC=50 and 39 at GOGC=100 with a 1600 MiB soft limit, but its kube-apiserver then
	// held 1.46-1.6 GB instead of 1.2; make test keeps ten planes alive at once, and an
	// emulation of CI at stop 44 with GOGC=100 ran short of memory (18 of 23 GB used, memory
	// stalls 55 % over five minutes, load 134). No GOMEMLIMIT by default: below the live heap
	// (~800 MB) idle API servers spin in GC. KCP_GOGC and KCP_GOMEMLIMIT override both.
	gogc := os.Getenv("KCP_GOGC")
	if gogc == "" {
		gogc = "50"
	}
	env := append(os.Environ(), "GODEBUG=", "GOGC="+gogc)
	if limit := os.Getenv("KCP_GOMEMLIMIT"); limit != "" {
		env = append(env, "GOMEMLIMIT="+limit)
	}
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return err
	}
	s.mu.Lock()
	s.children = append(s.children, cmd)
	if s.started == nil {
		s.started, s.restarting = map[string][]string{}, map[*exec.Cmd]bool{}
	}
	s.started[name] = append([]string{logPath}, args...)
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logFile.Close()
		s.mu.Lock()
		planned := s.restarting[cmd]
		delete(s.restarting, cmd)
		s.mu.Unlock()
		if !planned {
			s.exited <- fmt.Sprintf("%s exited: %v (log: %s)", name, err, logPath)
		}
	}()
	return nil
}

// kill stops one child as a crash would (SIGKILL); its exit is not a death of the plane. startAgain starts it
// with the arguments it had. Together: the fault "the API server restarted" of tests/faults, whose clients see
// connections refused in between.
func (s *supervisor) kill(name string) error {
	s.mu.Lock()
	var victim *exec.Cmd
	for _, c := range s.children {
		if c.ProcessState == nil && len(c.Args) > 1 && c.Args[1] == name {
			victim = c
		}
	}
	if victim != nil {
		s.restarting[victim] = true
	}
	s.mu.Unlock()
	if victim == nil {
		return fmt.Errorf("no running %s to kill", name)
	}
	_ = victim.Process.Kill()
	for victim.ProcessState == nil && victim.Process.Signal(syscall.Signal(0)) == nil {
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func (s *supervisor) startAgain(name string) error {
	s.mu.Lock()
	started, ok := s.started[name]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s was never started", name)
	}
	appendLog := func(path string) (*os.File, error) {
		return os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	}
	return s.start(name, started[0], appendLog, started[1:])
}

func (s *supervisor) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.children) - 1; i >= 0; i-- {
		c := s.children[i]
		if c.ProcessState != nil {
			continue
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() {
			for c.ProcessState == nil {
				if err := c.Process.Signal(syscall.Signal(0)); err != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = c.Process.Kill()
		}
	}
}

func writeKubeconfig(path, server string, p pki, user string) error {
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(p.path(user + ".crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.path(user + ".key"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kcp"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["kcp"] = &clientcmdapi.Context{Cluster: "kcp", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "kcp"
	return clientcmd.WriteToFile(*cfg, path)
}

func run(o runOpts) error {
	start := time.Now()
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := pki{dir: filepath.Join(dir, "pki")}
	if err := p.generate(); err != nil {
		return fmt.Errorf("pki: %w", err)
	}

	// etcd, in process.
	ecfg := embed.NewConfig()
	ecfg.Name = "kcp"
	ecfg.Dir = filepath.Join(dir, "etcd")
	_ = os.RemoveAll(ecfg.Dir)
	cu, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(o.etcdPort))
	pu, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(o.etcdPeer))
	ecfg.ListenClientUrls, ecfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ecfg.ListenPeerUrls, ecfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ecfg.InitialCluster = "kcp=" + pu.String()
	ecfg.LogLevel = "error"
	ecfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	ecfg.UnsafeNoFsync = true // test data: durability is not wanted, speed is
	ecfg.QuotaBackendBytes = 2 << 30
	snapPath := ""
	restored := false
	if o.snapCache != "" && o.crds != "" {
		if key, err := snapshotKey(o.crds); err == nil {
			snapPath = filepath.Join(o.snapCache, "etcd-"+key+".db")
		}
	}
	if snapPath != "" {
		if _, err := os.Stat(snapPath); err == nil {
			err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
				SnapshotPath: snapPath, Name: ecfg.Name, OutputDataDir: ecfg.Dir,
				PeerURLs: []string{pu.String()}, InitialCluster: ecfg.InitialCluster,
				InitialClusterToken: ecfg.InitialClusterToken,
			})
			if err != nil {
				logf("snapshot %s not restored (%v): starting empty", snapPath, err)
				_ = os.RemoveAll(ecfg.Dir)
			} else {
				restored = true
				now := time.Now()
				_ = os.Chtimes(snapPath, now, now) // used: the last to be pruned
				logf("restored etcd snapshot %s (%.1fs)", snapPath, time.Since(start).Seconds())
			}
		}
	}
	etcd, err := embed.StartEtcd(ecfg)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()
	select {
	case <-etcd.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		return errors.New("etcd did not become ready in 30s")
	}
	logf("etcd ready on %s (%.1fs)", cu, time.Since(start).Seconds())
	var conversions []string
	if restored && o.conversions != "" {
		ca, err := caBundle(p)
		if err != nil {
			return err
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		conversions, err = setConversions(cctx, cu.String(), o.conversions, ca)
		ccancel()
		if err != nil {
			return fmt.Errorf("conversion webhooks: %w", err)
		}
		logf("conversion webhooks set in etcd: %s", strings.Join(conversions, ", "))
	}

	sup := &supervisor{exited: make(chan string, 8)}
	defer sup.stop()
	server := fmt.Sprintf("https://127.0.0.1:%d", o.port)
	err = sup.spawn("apiserver", filepath.Join(dir, "apiserver.log"),
		"--etcd-servers="+cu.String(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(o.port),
		"--cert-dir="+p.dir,
		"--tls-cert-file="+p.path("apiserver.crt"),
		"--tls-private-key-file="+p.path("apiserver.key"),
		"--client-ca-file="+p.path("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p.path("sa.pub"),
		"--service-account-signing-key-file="+p.path("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--watch-cache=false",                                                // nothing here needs it; it costs memory per resource type
		"--profiling="+strconv.FormatBool(os.Getenv("KCP_PROFILING") == "1"), // /debug/pprof, for measuring
		"--requestheader-client-ca-file="+p.path("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+p.path("front-proxy-client.crt"),
		"--proxy-client-key-file="+p.path("front-proxy-client.key"),
	)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, server, p, "admin"); err != nil {
		return err
	}
	kcmKubeconfig := filepath.Join(dir, "controller-manager.kubeconfig")
	if err := writeKubeconfig(kcmKubeconfig, server, p, "controller-manager"); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	ctx, cancel := context.WithTimeout(context.Background(), o.readyTimout)
	defer cancel()
	if err := waitReady(ctx, cfg, sup); err != nil {
		return err
	}
	logf("kube-apiserver ready on %s (%.1fs)", server, time.Since(start).Seconds())

	if o.crds != "" {
		n, err := installCRDs(ctx, cfg, o.crds)
		if err != nil {
			return err
		}
		logf("%d CRDs established (%.1fs)", n, time.Since(start).Seconds())
		if snapPath != "" && !restored {
			if err := saveSnapshot(ctx, cu.String(), snapPath); err != nil {
				logf("snapshot not saved: %v", err)
			} else {
				logf("saved etcd snapshot %s for later starts", snapPath)
			}
		}
	}
	if o.kcm {
		err = sup.spawn("controller-manager", filepath.Join(dir, "controller-manager.log"),
			"--kubeconfig="+kcmKubeconfig,
			"--authentication-kubeconfig="+kcmKubeconfig,
			"--authorization-kubeconfig="+kcmKubeconfig,
			"--secure-port=0",
			"--leader-elect=false",
			"--use-service-account-credentials=false",
			"--service-account-private-key-file="+p.path("sa.key"),
			"--root-ca-file="+p.path("ca.crt"),
			// The workload controllers make the pods a cluster would get (Deployment ->
			// ReplicaSet -> Pod, StatefulSet, DaemonSet, Job) and their status; the scheduler
			// binds them and kwok, the node agent, runs them. The HPA controller only with --hpa
			// (tests/autoscaling, beside KEDA's metrics API server); else the simulator plays HPA status.
			"--controllers="+strings.Join(controllers(o.hpa), ","),
			// kwok renews each node's Lease; on a machine this busy a renewal can come late, and a
			// node declared NotReady would leave new pods Pending: 2 min, not the 50 s default.
			"--node-monitor-grace-period=2m",
		)
		if err != nil {
			return err
		}
	}
	if o.scheduler {
		schedKubeconfig := filepath.Join(dir, "scheduler.kubeconfig")
		if err := writeKubeconfig(schedKubeconfig, server, p, "scheduler"); err != nil {
			return err
		}
		// kube-scheduler as kubeadm runs it: its own identity (system:kube-scheduler, bound by
		// the API server's bootstrap RBAC), no leader election, serving on loopback only.
		err = sup.spawn("scheduler", filepath.Join(dir, "scheduler.log"),
			"--kubeconfig="+schedKubeconfig,
			"--authentication-kubeconfig="+schedKubeconfig,
			"--authorization-kubeconfig="+schedKubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(o.schedPort),
			"--cert-dir="+filepath.Join(dir, "scheduler"),
			"--leader-elect=false",
		)
		if err != nil {
			return err
		}
	}

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	if o.catalog != "" && o.pkgPort != 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- servePackages(ctx, cfg, o, p)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}

	debug.FreeOSMemory() // the CRD bundle and the install clients are garbage now
	ready := map[string]any{
		"ready": true, "kubeconfig": kubeconfig, "server": server, "pid": os.Getpid(),
		"seconds": time.Since(start).Seconds(), "restored": restored, "conversions": conversions,
	}
	b, _ := json.Marshal(ready)
	_ = os.WriteFile(filepath.Join(dir, "ready.json"), b, 0o644)
	fmt.Printf("READY %s\n", b)
	logf("ready in %.1fs; kubeconfig %s", time.Since(start).Seconds(), kubeconfig)

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	// SIGUSR1: the kube-apiserver crashes (SIGKILL) and stays down; SIGUSR2: it starts again. etcd, the
	// controller manager and the scheduler stay up (and reconnect), as on a cluster whose API server restarts.
	kill, again := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(kill, syscall.SIGUSR1)
	signal.Notify(again, syscall.SIGUSR2)
	var killedAt time.Time
	for {
		select {
		case s := <-sig:
			logf("%v: stopping", s)
			return nil
		case <-kill:
			if err := sup.kill("apiserver"); err != nil {
				return err
			}
			killedAt = time.Now()
			logf("kube-apiserver killed")
		case <-again:
			t0 := time.Now()
			if err := sup.startAgain("apiserver"); err != nil {
				return err
			}
			rctx, rcancel := context.WithTimeout(context.Background(), o.readyTimout)
			err := waitReady(rctx, cfg, sup)
			rcancel()
			if err != nil {
				return err
			}
			logf("kube-apiserver restarted, ready again in %.1fs (down %.1fs)", time.Since(t0).Seconds(), time.Since(killedAt).Seconds())
		case msg := <-sup.exited:
			return errors.New(msg)
		}
	}
}

func waitReady(ctx context.Context, cfg *rest.Config, sup *supervisor) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for {
		res := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx)
		var code int
		res.StatusCode(&code)
		if code == 200 {
			return nil
		}
		select {
		case msg := <-sup.exited:
			return errors.New(msg)
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createCRD creates one CRD. A busy machine (CI runs several control planes and builds at once) can make the API
// server answer a large schema's create with a timeout although the create went through, or before it did: such
// answers are retried, and AlreadyExists then means it was created.
func createCRD(ctx context.Context, cs *apiextclient.Clientset, crd *apiextv1.CustomResourceDefinition) error {
	var err error
	for attempt := range 5 {
		_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if !(apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 2 * time.Second):
		}
	}
	return err
}

func installCRDs(ctx context.Context, cfg *rest.Config, path string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var bundle struct {
		CRDs []apiextv1.CustomResourceDefinition `json:"crds"`
	}
	if err := json.Unmarshal(raw, &bundle); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	cs, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	existing := map[string]bool{}
	allEstablished := true
	if list, err := cs.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range list.Items {
			existing[c.Name] = true
			if !isEstablished(&c) {
				allEstablished = false
			}
		}
	}
	missing := 0
	for i := range bundle.CRDs {
		if !existing[bundle.CRDs[i].Name] {
			missing++
		}
	}
	if missing == 0 && allEstablished {
		// restored from a snapshot: wait until discovery lists every group
		return len(bundle.CRDs), waitDiscovery(ctx, cfg, bundle.CRDs)
	}
	work := make(chan *apiextv1.CustomResourceDefinition)
	errs := make(chan error, len(bundle.CRDs))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for crd := range work {
				if err := createCRD(ctx, cs, crd); err != nil {
					errs <- fmt.Errorf("CRD %s: %w", crd.Name, err)
				}
			}
		}()
	}
	for i := range bundle.CRDs {
		if !existing[bundle.CRDs[i].Name] {
			work <- &bundle.CRDs[i]
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		return 0, err
	}
	for {
		list, err := cs.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err == nil {
			pending := 0
			for i := range list.Items {
				if !isEstablished(&list.Items[i]) {
					pending++
				}
			}
			if pending == 0 {
				return len(bundle.CRDs), waitDiscovery(ctx, cfg, bundle.CRDs)
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("CRDs not established: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// servePackages starts the PackageManifest API and registers it with the aggregator the
// way OLM does on OpenShift (APIService v1.packages.operators.coreos.com, Service
// packageserver-service in openshift-operator-lifecycle-manager), except that the
// Service is of type ExternalName "localhost".
func servePackages(ctx context.Context, cfg *rest.Config, o runOpts, p pki) error {
	ps, err := loadCatalog(o.catalog)
	if err != nil {
		return err
	}
	if _, err := ps.serve(fmt.Sprintf("127.0.0.1:%d", o.pkgPort), p.path("packageserver.crt"), p.path("packageserver.key")); err != nil {
		return fmt.Errorf("packageserver: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	const ns = "openshift-operator-lifecycle-manager"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "packageserver-service", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(o.pkgPort)}},
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	caPEM, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	ag, err := aggregator.NewForConfig(cfg)
	if err != nil {
		return err
	}
	port := int32(o.pkgPort)
	_, err = ag.ApiregistrationV1().APIServices().Create(ctx, &apiregv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1." + pkgGroup},
		Spec: apiregv1.APIServiceSpec{
			Group: pkgGroup, Version: "v1",
			Service:              &apiregv1.ServiceReference{Namespace: ns, Name: "packageserver-service", Port: &port},
			CABundle:             caPEM,
			GroupPriorityMinimum: 2000, VersionPriority: 15,
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for {
		svc, err := ag.ApiregistrationV1().APIServices().Get(ctx, "v1."+pkgGroup, metav1.GetOptions{})
		if err == nil {
			for _, c := range svc.Status.Conditions {
				if c.Type == apiregv1.Available && c.Status == apiregv1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("APIService v1.%s not available: %w", pkgGroup, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// snapshotKey names the etcd snapshot after what it holds: this binary and the CRD bundle.
func snapshotKey(crds string) (string, error) {
	h := sha256.New()
	for _, f := range []string{crds} {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	id, err := goBuildID(self)
	if err != nil {
		return "", err
	}
	h.Write(id)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// goBuildID is the build ID the Go linker writes into a binary (its .note.go.buildid section): the same for a
// copy of the same build wherever the copy lives and whenever it was made (scripts/go_build_linked.sh copies one
// linked binary into every clone), different for any other build. Its size and mtime, the key before, changed with
// each copy.
func goBuildID(path string) ([]byte, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		return nil, fmt.Errorf("%s: no .note.go.buildid section", path)
	}
	return sec.Data()
}

func saveSnapshot(ctx context.Context, endpoint, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	_, err := snapshot.NewV3(zap.NewNop()).Save(ctx, clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second}, tmp)
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	pruneSnapshots(filepath.Dir(path), keepSnapshots)
	return nil
}

// keepSnapshots bounds the snapshot cache (it lives outside the clone and outlives it): about 36 MB each, one per
// kcp build and CRD bundle, the least recently used beyond this many removed.
const keepSnapshots = 8

func pruneSnapshots(dir string, keep int) {
	paths, _ := filepath.Glob(filepath.Join(dir, "etcd-*.db"))
	type snap struct {
		path string
		used time.Time
	}
	var snaps []snap
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			snaps = append(snaps, snap{p, st.ModTime()})
		}
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].used.After(snaps[j].used) })
	for i := keep; i < len(snaps); i++ {
		_ = os.Remove(snaps[i].path)
	}
}

func isEstablished(c *apiextv1.CustomResourceDefinition) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
			return true
		}
	}
	return false
}

// waitDiscovery returns when discovery serves every group/version of the CRDs, so that
// clients relying on discovery (kubectl, kubernetes.core) find them at once.
func waitDiscovery(ctx context.Context, cfg *rest.Config, crds []apiextv1.CustomResourceDefinition) error {
	want := map[string]bool{}
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			if v.Served {
				want[c.Spec.Group+"/"+v.Name] = true
			}
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for {
		groups, err := cs.Discovery().ServerGroups()
		if err == nil {
			have := map[string]bool{}
			for _, g := range groups.Groups {
				for _, v := range g.Versions {
					have[v.GroupVersion] = true
				}
			}
			missing := 0
			for gv := range want {
				if !have[gv] {
					missing++
				}
			}
			if missing == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("discovery does not list every CRD group: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
