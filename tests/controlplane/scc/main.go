// sccwebhook runs OpenShift's SecurityContextConstraints admission plugin
// (github.com/openshift/apiserver-library-go/pkg/securitycontextconstraints/sccadmission)
// as an admission webhook of the local control plane: /mutate calls the plugin's Admit,
// /validate its Validate, /namespace plays OpenShift's namespace SCC allocation (the
// openshift.io/sa.scc.* annotations, normally set by cluster-policy-controller).
// The "use" check goes through the apiserver's RBAC by SubjectAccessReview.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/openshift/apiserver-library-go/pkg/securitycontextconstraints/sccadmission"
	securityclient "github.com/openshift/client-go/security/clientset/versioned"
	securityinformers "github.com/openshift/client-go/security/informers/externalversions"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

type plugin interface {
	admission.MutationInterface
	admission.ValidationInterface
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the apiserver")
	listen := flag.String("listen", "127.0.0.1:0", "address to serve HTTPS on")
	cert := flag.String("tls-cert", "", "serving certificate")
	key := flag.String("tls-key", "", "serving key")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *listen, *cert, *key); err != nil {
		fmt.Fprintln(os.Stderr, "sccwebhook:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, listen, cert, key string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// every admitted pod costs SubjectAccessReviews: client-go's default 5 QPS would queue them
	cfg.QPS, cfg.Burst = 100, 200
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	sec, err := securityclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kube.AuthorizationV1(),
		AllowCacheTTL:             time.Second,
		DenyCacheTTL:              time.Second,
		WebhookRetryBackoff:       &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
	}.New()
	if err != nil {
		return err
	}
	kubeInf := informers.NewSharedInformerFactory(kube, 0)
	secInf := securityinformers.NewSharedInformerFactory(sec, 0)
	c := sccadmission.NewConstraint()
	c.SetAuthorizer(authz)
	c.SetExternalKubeInformerFactory(kubeInf)
	c.SetSecurityInformers(secInf.Security().V1().SecurityContextConstraints())
	if err := c.ValidateInitialization(); err != nil {
		return err
	}
	ctx := context.Background()
	kubeInf.Start(ctx.Done())
	secInf.Start(ctx.Done())
	alloc := newAllocator(kube)
	if err := alloc.annotateExisting(ctx); err != nil {
		return err
	}
	var p plugin = c
	mux := http.NewServeMux()
	mux.HandleFunc("/mutate", review(func(ctx context.Context, r *podRequest) error { return p.Admit(ctx, r.attrs, nil) }, true))
	mux.HandleFunc("/validate", review(func(ctx context.Context, r *podRequest) error { return p.Validate(ctx, r.attrs, nil) }, false))
	mux.HandleFunc("/namespace", alloc.serve)
	mux.HandleFunc("/scc", serveDefaults)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	fmt.Printf("sccwebhook: serving on %s\n", listen)
	return http.ListenAndServeTLS(listen, cert, key, mux)
}
