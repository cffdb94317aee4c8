package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	coreapi "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
)

// podRequest is one AdmissionReview's pod, converted to the internal type the plugin works on.
type podRequest struct {
	attrs    admission.Attributes
	pod      *coreapi.Pod
	original []byte // the request's pod as these API types serialise it (fields unknown to them left out)
}

func decodePod(raw []byte) (*coreapi.Pod, []byte, error) {
	if len(raw) == 0 {
		return nil, nil, nil
	}
	external := &corev1.Pod{}
	if err := json.Unmarshal(raw, external); err != nil {
		return nil, nil, err
	}
	internal := &coreapi.Pod{}
	if err := legacyscheme.Scheme.Convert(external, internal, nil); err != nil {
		return nil, nil, err
	}
	normalised, err := json.Marshal(external)
	return internal, normalised, err
}

func encodePod(pod *coreapi.Pod) ([]byte, error) {
	external := &corev1.Pod{}
	if err := legacyscheme.Scheme.Convert(pod, external, nil); err != nil {
		return nil, err
	}
	return json.Marshal(external)
}

func newPodRequest(req *admissionv1.AdmissionRequest) (*podRequest, error) {
	pod, original, err := decodePod(req.Object.Raw)
	if err != nil {
		return nil, err
	}
	old, _, err := decodePod(req.OldObject.Raw)
	if err != nil {
		return nil, err
	}
	var oldObj runtime.Object
	if old != nil {
		oldObj = old
	}
	extra := map[string][]string{}
	for k, v := range req.UserInfo.Extra {
		extra[k] = v
	}
	who := asOpenShiftSees(&user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups, Extra: extra}, pod)
	dryRun := req.DryRun != nil && *req.DryRun
	kind := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	resource := schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource}
	attrs := admission.NewAttributesRecord(pod, oldObj, kind, req.Namespace, req.Name, resource,
		req.SubResource, admission.Operation(req.Operation), nil, dryRun, who)
	return &podRequest{attrs: attrs, pod: pod, original: original}, nil
}

// review serves one AdmissionReview: the plugin step runs on the internal pod; what it
// changed goes back as a JSON patch, a refusal as the plugin's own status.
func review(step func(context.Context, *podRequest) error, mutating bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
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
		if err := answer(r.Context(), in.Request, step, resp, mutating); err != nil {
			resp.Allowed = false
			resp.Result = statusOf(err)
		}
		in.Response, in.Request = resp, nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(in)
	}
}

func answer(ctx context.Context, req *admissionv1.AdmissionRequest, step func(context.Context, *podRequest) error, resp *admissionv1.AdmissionResponse, mutating bool) error {
	pr, err := newPodRequest(req)
	if err != nil {
		return err
	}
	if pr.pod == nil {
		return nil
	}
	if err := step(ctx, pr); err != nil || !mutating { // a validating webhook may not return a patch
		return err
	}
	mutated, err := encodePod(pr.pod)
	if err != nil {
		return err
	}
	ops, err := jsonpatch.CreatePatch(pr.original, mutated)
	if err != nil || len(ops) == 0 {
		return err
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	return nil
}

func statusOf(err error) *metav1.Status {
	if s, ok := err.(apierrors.APIStatus); ok {
		st := s.Status()
		return &st
	}
	return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: err.Error()}
}
