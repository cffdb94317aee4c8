package main

// A read-only stand-in for OLM's packageserver: the aggregated API
// packages.operators.coreos.com/v1 PackageManifest, served from a catalog data file.
// kube-apiserver's aggregator proxies to it through an APIService whose Service is of
// type ExternalName "localhost" (see registerPackageServer). Authentication and
// authorization happen in kube-apiserver before the request is proxied (RBAC applies to
// packagemanifests as on OpenShift); this server trusts what reaches it and only serves
// get and list.

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const pkgGroup = "packages.operators.coreos.com"

type catalogFile struct {
	Catalogs map[string]struct {
		DisplayName string `json:"displayName"`
		Publisher   string `json:"publisher"`
	} `json:"catalogs"`
	Packages []struct {
		Name           string `json:"name"`
		Catalog        string `json:"catalog"`
		Provider       string `json:"provider"`
		DisplayName    string `json:"displayName"`
		DefaultChannel string `json:"defaultChannel"`
		Channels       []struct {
			Name       string `json:"name"`
			CurrentCSV string `json:"currentCSV"`
			Version    string `json:"version"`
		} `json:"channels"`
	} `json:"packages"`
}

type packageServer struct {
	created time.Time
	items   []map[string]any // PackageManifests without namespace
}

func loadCatalog(path string) (*packageServer, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cf catalogFile
	if err := yaml.UnmarshalStrict(raw, &cf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ps := &packageServer{created: time.Now().UTC().Truncate(time.Second)}
	for _, p := range cf.Packages {
		cat := cf.Catalogs[p.Catalog]
		channels := []any{}
		for _, c := range p.Channels {
			channels = append(channels, map[string]any{
				"name":       c.Name,
				"currentCSV": c.CurrentCSV,
				"currentCSVDesc": map[string]any{
					"displayName": p.DisplayName,
					"version":     c.Version,
					"provider":    map[string]any{"name": p.Provider},
				},
			})
		}
		ps.items = append(ps.items, map[string]any{
			"apiVersion": pkgGroup + "/v1",
			"kind":       "PackageManifest",
			"metadata": map[string]any{
				"name":              p.Name,
				"creationTimestamp": ps.created.Format(time.RFC3339),
				"labels": map[string]any{
					"catalog":                         p.Catalog,
					"catalog-namespace":               "openshift-marketplace",
					"provider":                        p.Provider,
					"operatorframework.io/arch.amd64": "supported",
					"operatorframework.io/os.linux":   "supported",
				},
			},
			"spec": map[string]any{},
			"status": map[string]any{
				"catalogSource":            p.Catalog,
				"catalogSourceDisplayName": cat.DisplayName,
				"catalogSourcePublisher":   cat.Publisher,
				"catalogSourceNamespace":   "openshift-marketplace",
				"packageName":              p.Name,
				"provider":                 map[string]any{"name": p.Provider},
				"defaultChannel":           p.DefaultChannel,
				"channels":                 channels,
			},
		})
	}
	return ps, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeJSON(w, code, metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
	})
}

func (ps *packageServer) withNamespace(item map[string]any, ns string) map[string]any {
	out := map[string]any{}
	for k, v := range item {
		out[k] = v
	}
	md := map[string]any{}
	for k, v := range item["metadata"].(map[string]any) {
		md[k] = v
	}
	md["namespace"] = ns
	out["metadata"] = md
	return out
}

func (ps *packageServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: pkgGroup + "/v1", Version: "v1"}
	group := metav1.APIGroup{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:     pkgGroup, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv,
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch path {
	case "/healthz", "/readyz", "/livez":
		_, _ = w.Write([]byte("ok"))
		return
	case "/apis":
		writeJSON(w, 200, metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups:   []metav1.APIGroup{group},
		})
		return
	case "/apis/" + pkgGroup:
		writeJSON(w, 200, group)
		return
	case "/apis/" + pkgGroup + "/v1":
		writeJSON(w, 200, metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: pkgGroup + "/v1",
			APIResources: []metav1.APIResource{{
				Name: "packagemanifests", SingularName: "packagemanifest", Namespaced: true,
				Kind: "PackageManifest", Verbs: metav1.Verbs{"get", "list"},
				Categories: []string{"olm", "packages"},
			}},
		})
		return
	}
	prefix := "/apis/" + pkgGroup + "/v1/"
	if !strings.HasPrefix(path, prefix) {
		writeStatus(w, 404, metav1.StatusReasonNotFound, "the server could not find the requested resource")
		return
	}
	if r.Method != http.MethodGet {
		writeStatus(w, 405, metav1.StatusReasonMethodNotAllowed, "packagemanifests are read-only")
		return
	}
	if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
		writeStatus(w, 405, metav1.StatusReasonMethodNotAllowed, "watch is not supported by this packageserver stand-in")
		return
	}
	parts := strings.Split(strings.TrimPrefix(path, prefix), "/")
	ns, name := "openshift-marketplace", ""
	switch {
	case len(parts) == 1 && parts[0] == "packagemanifests":
	case len(parts) == 3 && parts[0] == "namespaces" && parts[2] == "packagemanifests":
		ns = parts[1]
	case len(parts) == 4 && parts[0] == "namespaces" && parts[2] == "packagemanifests":
		ns, name = parts[1], parts[3]
	default:
		writeStatus(w, 404, metav1.StatusReasonNotFound, "the server could not find the requested resource")
		return
	}
	if name != "" {
		for _, it := range ps.items {
			if it["metadata"].(map[string]any)["name"] == name {
				writeJSON(w, 200, ps.withNamespace(it, ns))
				return
			}
		}
		writeStatus(w, 404, metav1.StatusReasonNotFound,
			fmt.Sprintf("packagemanifests.%s %q not found", pkgGroup, name))
		return
	}
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		writeStatus(w, 400, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	fieldName := ""
	if fs := r.URL.Query().Get("fieldSelector"); fs != "" {
		fieldName = strings.TrimPrefix(fs, "metadata.name=")
	}
	items := []any{}
	for _, it := range ps.items {
		md := it["metadata"].(map[string]any)
		lbl := labels.Set{}
		for k, v := range md["labels"].(map[string]any) {
			lbl[k] = v.(string)
		}
		if !sel.Matches(lbl) || (fieldName != "" && md["name"] != fieldName) {
			continue
		}
		items = append(items, ps.withNamespace(it, ns))
	}
	writeJSON(w, 200, map[string]any{
		"apiVersion": pkgGroup + "/v1", "kind": "PackageManifestList",
		"metadata": map[string]any{"resourceVersion": "1"}, "items": items,
	})
}

func (ps *packageServer) serve(addr, certFile, keyFile string) (net.Listener, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	go func() { _ = http.Serve(ln, ps) }()
	return ln, nil
}
