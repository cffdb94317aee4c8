package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/openshift/library-go/pkg/security/uid"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// The annotations OpenShift's namespace SCC allocation controller (cluster-policy-controller)
// puts on every namespace, and its default ranges: UIDs 1000000000-1999999999 in blocks of
// 10000, MCS level s0 with two of 1024 categories. This part is played: the allocation order
// is this program's (one block per namespace, first free offset), not OpenShift's bitmap.
const (
	uidRangeAnnotation  = "openshift.io/sa.scc.uid-range"
	supGroupsAnnotation = "openshift.io/sa.scc.supplemental-groups"
	mcsAnnotation       = "openshift.io/sa.scc.mcs"
	mcsCategories       = 1024
)

type allocator struct {
	kube  kubernetes.Interface
	rng   *uid.Range
	mu    sync.Mutex
	taken map[string]bool // blocks handed out, by their string form
}

func newAllocator(kube kubernetes.Interface) *allocator {
	rng, err := uid.NewRange(1000000000, 1999999999, 10000)
	if err != nil {
		panic(err)
	}
	return &allocator{kube: kube, rng: rng, taken: map[string]bool{}}
}

// next hands out the first free block and the MCS label of the same offset.
func (a *allocator) next() (map[string]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for off := uint32(0); off < a.rng.Size(); off++ {
		block, ok := a.rng.BlockAt(off)
		if !ok || a.taken[block.String()] {
			continue
		}
		a.taken[block.String()] = true
		return map[string]string{
			uidRangeAnnotation:  block.String(),
			supGroupsAnnotation: block.String(),
			mcsAnnotation:       mcsLabel(off),
		}, nil
	}
	return nil, fmt.Errorf("uid range %s exhausted", a.rng)
}

// mcsLabel numbers the two-category combinations c<hi>,c<lo> (hi > lo) in order.
func mcsLabel(off uint32) string {
	hi := uint32(1)
	for (hi+1)*hi/2 <= off && hi+1 < mcsCategories {
		hi++
	}
	lo := off - hi*(hi-1)/2
	return fmt.Sprintf("s0:c%d,c%d", hi, lo)
}

func missing(ns *corev1.Namespace) bool {
	_, ok := ns.Annotations[uidRangeAnnotation]
	return !ok
}

// annotateExisting gives every namespace present at start the annotations, as the
// controller's first sync does.
func (a *allocator) annotateExisting(ctx context.Context) error {
	list, err := a.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		if !missing(&list.Items[i]) {
			a.taken[list.Items[i].Annotations[uidRangeAnnotation]] = true
		}
	}
	for i := range list.Items {
		ns := &list.Items[i]
		if !missing(ns) {
			continue
		}
		ann, err := a.next()
		if err != nil {
			return err
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		if _, err := a.kube.CoreV1().Namespaces().Patch(ctx, ns.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// serve is the namespace webhook: a namespace is created with its annotations, so a pod
// created right after it never meets a namespace the controller has not reached yet.
func (a *allocator) serve(w http.ResponseWriter, r *http.Request) {
	in := admissionv1.AdmissionReview{}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	if err != nil || in.Request == nil {
		http.Error(w, "bad AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: true}
	ns := &corev1.Namespace{}
	if err := json.Unmarshal(in.Request.Object.Raw, ns); err == nil && missing(ns) {
		if ann, err := a.next(); err == nil {
			resp.Patch, _ = json.Marshal(annotationPatch(ns, ann))
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType = &pt
		}
	}
	in.Response, in.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(in)
}

func annotationPatch(ns *corev1.Namespace, ann map[string]string) []map[string]any {
	if ns.Annotations == nil {
		return []map[string]any{{"op": "add", "path": "/metadata/annotations", "value": ann}}
	}
	var ops []map[string]any
	for k, v := range ann {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/" + escape(k), "value": v})
	}
	return ops
}

func escape(k string) string {
	out := []rune{}
	for _, c := range k {
		switch c {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, c)
		}
	}
	return string(out)
}
