package main

// Conversion webhooks of CRDs restored from an etcd snapshot, set in etcd before kube-apiserver starts.
//
// A KServe plane points the conversion of its LLMInferenceService(Config) CRDs at the controller's webhook on a
// loopback port with the plane's CA, both of which differ from plane to plane, so the shared snapshot cannot hold
// them. Sent as a PATCH once kube-apiserver is up, each of those updates made it validate the whole of a CRD of about
// 800 kB and then build its OpenAPI, structural schema and serving info a second time: in a CPU profile of a
// snapshot-restored start the PATCH requests alone took 13 % of kube-apiserver's CPU. Written into the restored
// etcd data instead, the CRDs are loaded once, already pointing at the webhook. The first start of a bundle (no
// snapshot yet) leaves them to the caller, which PATCHes as before: ready.json lists what was set here.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// protobufMagic starts every object kube-apiserver stores as protobuf (its default storage media type).
var protobufMagic = []byte("k8s\x00")

// setConversions reads path ({CRD name: spec.conversion}; an empty webhook caBundle is filled with the plane's CA)
// and writes each into the CRD stored in etcd at endpoint. It returns the names it set.
func setConversions(ctx context.Context, endpoint, path string, ca []byte) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var want map[string]apiextv1.CustomResourceConversion
	if err := json.Unmarshal(raw, &want); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// kube-apiserver stores CRDs at apiextensions.k8s.io/v1beta1 (its storage version): decoded to v1 through the
	// internal version, and encoded back at the version they were stored at
	scheme := runtime.NewScheme()
	install.Install(scheme)
	codecs := serializer.NewCodecFactory(scheme)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	var set []string
	for _, name := range names {
		conv := want[name]
		if conv.Webhook != nil && conv.Webhook.ClientConfig != nil && len(conv.Webhook.ClientConfig.CABundle) == 0 {
			conv.Webhook.ClientConfig.CABundle = ca
		}
		key := "/registry/apiextensions.k8s.io/customresourcedefinitions/" + name
		got, err := cli.Get(ctx, key)
		if err != nil {
			return set, err
		}
		if len(got.Kvs) == 0 {
			continue // not in the snapshot: the caller creates or patches it
		}
		kv := got.Kvs[0]
		mediaType := runtime.ContentTypeJSON
		if bytes.HasPrefix(kv.Value, protobufMagic) {
			mediaType = runtime.ContentTypeProtobuf
		}
		info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
		if !ok {
			return set, fmt.Errorf("no %s serializer", mediaType)
		}
		_, stored, err := codecs.UniversalDeserializer().Decode(kv.Value, nil, nil)
		if err != nil {
			return set, fmt.Errorf("CRD %s in etcd: %w", name, err)
		}
		internal, err := runtime.Decode(codecs.UniversalDecoder(), kv.Value) // to the internal version
		if err != nil {
			return set, fmt.Errorf("CRD %s in etcd: %w", name, err)
		}
		crd := &apiextv1.CustomResourceDefinition{}
		if err := scheme.Convert(internal, crd, nil); err != nil {
			return set, fmt.Errorf("CRD %s in etcd: %w", name, err)
		}
		crd.Spec.Conversion = &conv
		crd.Generation++ // a change of spec, as an update through the API counts it
		if err := scheme.Convert(crd, internal, nil); err != nil {
			return set, err
		}
		out, err := runtime.Encode(codecs.EncoderForVersion(info.Serializer, stored.GroupVersion()), internal)
		if err != nil {
			return set, err
		}
		// only if nobody wrote it since (nothing else runs yet: kube-apiserver starts after this)
		txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(out))).Commit()
		if err != nil {
			return set, err
		}
		if !txn.Succeeded {
			return set, fmt.Errorf("CRD %s changed in etcd while its conversion was set", name)
		}
		set = append(set, name)
	}
	return set, nil
}

// caBundle is the plane's CA certificate as a CRD's caBundle holds it (PEM; its JSON form is base64).
func caBundle(p pki) ([]byte, error) {
	b, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return nil, err
	}
	return b, nil
}
