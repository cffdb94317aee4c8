// Command loadgen sends open-loop traffic through the endpoint picker (EPP) as Envoy does: for each
// request one ext_proc Process stream (request headers, then the body with end_of_stream), the EPP's
// routing decision (the x-gateway-destination-endpoint header, or an immediate response), the HTTP
// POST to the endpoint it picked, and the response headers and body sent back on the same stream,
// where the EPP's response plugins and request metrics run.
//
// It is the Go form of tests/dataplane/gateway.py (same steps, same headers), for rates the Python
// client cannot hold on a loaded 2-core machine. Arrivals are due at i/rate seconds from the start
// (open loop: a slow answer does not hold the next request back). The run ends after -duration
// seconds or as soon as the file -stop names exists; then it waits for the requests in flight and
// prints one JSON object: sent, ok, statuses, errors, seconds, achieved_rps.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

const destinationHeader = "x-gateway-destination-endpoint" // llm-d-router v0.9.0 pkg/epp/metadata/consts.go

// headers Envoy owns: never copied from the EPP's mutation onto the upstream request
var pseudo = map[string]bool{":method": true, ":path": true, ":authority": true, ":scheme": true, "content-length": true}

type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ",") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

type result struct {
	Sent        int64          `json:"sent"`
	OK          int64          `json:"ok"`
	Statuses    map[string]int `json:"statuses"`
	Errors      map[string]int `json:"errors"`
	Seconds     float64        `json:"seconds"`
	AchievedRPS float64        `json:"achieved_rps"`
}

type client struct {
	epp  extprocv3.ExternalProcessorClient
	http *http.Client
	path string
	hdrs map[string]string
}

func headerMap(h map[string]string) *corev3.HeaderMap {
	out := &corev3.HeaderMap{}
	for k, v := range h {
		out.Headers = append(out.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	return out
}

func setHeaders(m interface {
	GetSetHeaders() []*corev3.HeaderValueOption
}) map[string]string {
	out := map[string]string{}
	for _, o := range m.GetSetHeaders() {
		h := o.GetHeader()
		v := string(h.GetRawValue())
		if v == "" {
			v = h.GetValue()
		}
		out[strings.ToLower(h.GetKey())] = v
	}
	return out
}

// routing reads the EPP's answer: the upstream headers and body, or the status of its immediate response.
func routing(stream extprocv3.ExternalProcessor_ProcessClient, body []byte) (map[string]string, []byte, int, error) {
	var mutated map[string]string
	var chunks []byte
	for {
		resp, err := stream.Recv()
		if err != nil {
			return nil, nil, 0, fmt.Errorf("ext_proc before routing: %w", err)
		}
		switch r := resp.GetResponse().(type) {
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			return nil, nil, int(r.ImmediateResponse.GetStatus().GetCode()), nil
		case *extprocv3.ProcessingResponse_RequestHeaders:
			mutated = setHeaders(r.RequestHeaders.GetResponse().GetHeaderMutation())
		case *extprocv3.ProcessingResponse_RequestBody:
			switch m := r.RequestBody.GetResponse().GetBodyMutation().GetMutation().(type) {
			case *extprocv3.BodyMutation_StreamedResponse:
				chunks = append(chunks, m.StreamedResponse.GetBody()...)
				if m.StreamedResponse.GetEndOfStream() {
					return mutated, chunks, 0, nil
				}
			case *extprocv3.BodyMutation_Body:
				return mutated, m.Body, 0, nil
			default:
				return mutated, body, 0, nil
			}
		default:
			return nil, nil, 0, fmt.Errorf("unexpected ext_proc response %T before routing", r)
		}
	}
}

// post sends one request through the EPP's decision; the HTTP status (0 with an error when it failed outright).
func (c *client) post(ctx context.Context, body []byte, id int64) (int, error) {
	stream, err := c.epp.Process(ctx)
	if err != nil {
		return 0, fmt.Errorf("ext_proc stream: %w", err)
	}
	req := map[string]string{
		":method": "POST", ":path": c.path, ":authority": "gateway.local", ":scheme": "http",
		"content-type": "application/json", "x-request-id": fmt.Sprintf("loadgen-%d-%d", os.Getpid(), id),
	}
	for k, v := range c.hdrs {
		req[k] = v
	}
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(req)}}}); err != nil {
		return 0, fmt.Errorf("ext_proc headers: %w", err)
	}
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}}); err != nil {
		return 0, fmt.Errorf("ext_proc body: %w", err)
	}
	mutated, upstreamBody, status, err := routing(stream, body)
	if err != nil || status != 0 {
		return status, err
	}
	endpoint := strings.TrimSpace(strings.Split(mutated[destinationHeader], ",")[0])
	if endpoint == "" {
		return 0, errors.New("routed without " + destinationHeader)
	}
	return c.forward(stream, endpoint, req, mutated, upstreamBody)
}

func (c *client) forward(stream extprocv3.ExternalProcessor_ProcessClient, endpoint string, req, mutated map[string]string, body []byte) (int, error) {
	hreq, err := http.NewRequestWithContext(stream.Context(), http.MethodPost, "http://"+endpoint+c.path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for _, h := range []map[string]string{req, mutated} {
		for k, v := range h {
			if !pseudo[k] {
				hreq.Header.Set(k, v)
			}
		}
	}
	drained := make(chan struct{})
	go func() { // the EPP's answers to the response phases
		defer close(drained)
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
		}
	}()
	resp, err := c.http.Do(hreq)
	if err != nil {
		return 0, fmt.Errorf("upstream %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	rh := map[string]string{":status": fmt.Sprint(resp.StatusCode)}
	for k := range resp.Header {
		rh[strings.ToLower(k)] = resp.Header.Get(k)
	}
	_ = stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(rh)}}})
	buf := make([]byte, 32*1024)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			_ = stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
				ResponseBody: &extprocv3.HttpBody{Body: append([]byte(nil), buf[:n]...)}}})
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, fmt.Errorf("upstream body: %w", rerr)
		}
	}
	_ = stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{EndOfStream: true}}})
	_ = stream.CloseSend()
	select {
	case <-drained:
	case <-time.After(30 * time.Second):
	}
	return resp.StatusCode, nil
}

func dial(target, caFile string) (*grpc.ClientConn, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	return grpc.NewClient(target, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})))
}

func main() {
	target := flag.String("epp", "", "the EPP's ext_proc address (host:port, TLS)")
	caFile := flag.String("ca", "", "PEM file of the CA that signed the EPP's certificate")
	rate := flag.Float64("rate", 1, "requests per second (open loop)")
	duration := flag.Float64("duration", 60, "seconds of arrivals at most")
	stopFile := flag.String("stop", "", "end the arrivals as soon as this file exists")
	path := flag.String("path", "/v1/chat/completions", "request path")
	bodyTmpl := flag.String("body", "", "JSON body; %d is replaced by the request's number")
	var hdrs headerFlags
	flag.Var(&hdrs, "header", "extra request header name=value (repeatable)")
	flag.Parse()
	if *target == "" || *caFile == "" || *bodyTmpl == "" || *rate <= 0 {
		fmt.Fprintln(os.Stderr, "loadgen: -epp, -ca, -body and a positive -rate are required")
		os.Exit(2)
	}
	conn, err := dial(*target, *caFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
	defer conn.Close()
	c := &client{
		epp:  extprocv3.NewExternalProcessorClient(conn),
		http: &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 200}},
		path: *path, hdrs: map[string]string{},
	}
	for _, h := range hdrs {
		k, v, _ := strings.Cut(h, "=")
		c.hdrs[strings.ToLower(k)] = v
	}
	res := run(c, *rate, *duration, *stopFile, *bodyTmpl)
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

func run(c *client, rate, duration float64, stopFile, bodyTmpl string) result {
	var mu sync.Mutex
	res := result{Statuses: map[string]int{}, Errors: map[string]int{}}
	var wg sync.WaitGroup
	var sent, ok atomic.Int64
	t0 := time.Now()
	lastCheck := t0
	for {
		now := time.Now()
		elapsed := now.Sub(t0).Seconds()
		if elapsed >= duration {
			break
		}
		if stopFile != "" && now.Sub(lastCheck) > 100*time.Millisecond {
			lastCheck = now
			if _, err := os.Stat(stopFile); err == nil {
				break
			}
		}
		for due := int64(elapsed * rate); sent.Load() < due; {
			i := sent.Add(1)
			body := []byte(strings.ReplaceAll(bodyTmpl, "%d", fmt.Sprint(i)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, err := c.post(context.Background(), body, i)
				mu.Lock()
				defer mu.Unlock()
				res.Statuses[fmt.Sprint(status)]++
				if err != nil {
					msg := err.Error()
					if len(msg) > 160 {
						msg = msg[:160]
					}
					res.Errors[msg]++
				}
				if status == http.StatusOK {
					ok.Add(1)
				}
			}()
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(t0).Seconds()
	wg.Wait()
	res.Sent, res.OK, res.Seconds = sent.Load(), ok.Load(), took
	res.AchievedRPS = float64(res.Sent) / took
	return res
}
