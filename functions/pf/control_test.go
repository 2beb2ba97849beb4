package pf

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/foldline/foldline/functions/pf/internal/instancepb"
)

// The control service and the metrics endpoint report what process counted.
func TestControlServiceAndMetricsReportTrueCounts(t *testing.T) {
	conf := testConf()
	conf.InstanceID, conf.ClusterName, conf.MaxRetries = 2, "standalone", 1
	inst, _ := newTestInstance(t, conf, func(ctx context.Context, in []byte) ([]byte, error) {
		fc, _ := FromContext(ctx)
		fc.RecordMetric("bytes", float64(len(in)))
		if string(in) == "bad" {
			return nil, errors.New("bad payload")
		}
		return in, nil
	})
	stop, err := inst.serve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	for i, p := range []string{"a", "bad", "ccc"} {
		if err := inst.process(t.Context(), ledgerEvent(p, int64(i)), &fakeAcker{}); err != nil {
			t.Fatal(err)
		}
	}

	conn, err := grpc.NewClient(inst.controlAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	control := instancepb.NewInstanceControlClient(conn)
	ctx := t.Context()

	status, err := control.GetFunctionStatus(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if !status.Running || status.NumReceived != 3 || status.NumSuccessfullyProcessed != 2 ||
		status.NumUserExceptions != 2 || len(status.LatestUserExceptions) != 2 ||
		status.LatestUserExceptions[0].ExceptionString != "bad payload" || status.InstanceId != "2" ||
		status.LastInvocationTime < time.Now().Add(-time.Hour).UnixMilli() {
		t.Errorf("status %v", status)
	}
	metrics, err := control.GetMetrics(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if metrics.ReceivedTotal != 3 || metrics.ProcessedSuccessfullyTotal != 2 || metrics.UserExceptionsTotal != 2 ||
		metrics.ReceivedTotal_1Min != 3 || metrics.UserMetrics["bytes"] != 3 || metrics.LastInvocation == 0 {
		t.Errorf("metrics %v", metrics)
	}
	health, err := control.HealthCheck(ctx, &emptypb.Empty{})
	if err != nil || !health.Success {
		t.Errorf("health check %v, %v", health, err)
	}

	body := scrape(t, "http://"+inst.metricsAddr+"/")
	for _, want := range []string{
		`pulsar_function_received_total{cluster="standalone",fqfn="t/n/f",instance_id="2",name="f",namespace="t/n",tenant="t"} 3`,
		`pulsar_function_processed_successfully_total{cluster="standalone",fqfn="t/n/f",instance_id="2",name="f",namespace="t/n",tenant="t"} 2`,
		`pulsar_function_user_exceptions_total{cluster="standalone",fqfn="t/n/f",instance_id="2",name="f",namespace="t/n",tenant="t"} 2`,
		`pulsar_function_process_latency_ms_count{cluster="standalone",fqfn="t/n/f",instance_id="2",name="f",namespace="t/n",tenant="t"} 4`,
		`pulsar_function_user_metric{cluster="standalone",fqfn="t/n/f",instance_id="2",metric="bytes",name="f",namespace="t/n",tenant="t"} 3`,
		`pulsar_function_user_exception{cluster="standalone",error="bad payload",`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics page lacks %s\n%s", want, body)
		}
	}
	if !strings.Contains(scrape(t, "http://"+inst.metricsAddr+"/metrics"), "pulsar_function_received_total") {
		t.Error("/metrics serves no metrics")
	}

	reset, err := control.GetAndResetMetrics(ctx, &emptypb.Empty{})
	if err != nil || reset.ReceivedTotal_1Min != 3 {
		t.Fatalf("GetAndResetMetrics %v, %v", reset, err)
	}
	if _, err := control.ResetMetrics(ctx, &emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	after, err := control.GetMetrics(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ReceivedTotal_1Min != 0 || after.ReceivedTotal != 3 {
		t.Errorf("after reset: %v; want the window zeroed and the total kept", after)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// The worker can give the control service and the metrics the same port
// (it picks each a port free at that moment): one listener serves both,
// where two would fail and the instance restart on the same ports for ever.
func TestOnePortServesControlAndMetrics(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	conf := testConf()
	conf.Port, conf.MetricsPort = port, port
	inst, _ := newTestInstance(t, conf, func(in []byte) ([]byte, error) { return in, nil })
	stop, err := inst.serve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := inst.process(t.Context(), ledgerEvent("a", 1), &fakeAcker{}); err != nil {
		t.Fatal(err)
	}
	if inst.controlAddr != inst.metricsAddr {
		t.Fatalf("control on %s, metrics on %s; want one address", inst.controlAddr, inst.metricsAddr)
	}

	conn, err := grpc.NewClient(inst.controlAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	control := instancepb.NewInstanceControlClient(conn)
	if health, err := control.HealthCheck(t.Context(), &emptypb.Empty{}); err != nil || !health.Success {
		t.Errorf("health check %v, %v", health, err)
	}
	if status, err := control.GetFunctionStatus(t.Context(), &emptypb.Empty{}); err != nil || status.NumReceived != 1 {
		t.Errorf("status %v, %v; want 1 received", status, err)
	}
	if body := scrape(t, "http://"+inst.metricsAddr+"/metrics"); !strings.Contains(body, "pulsar_function_received_total") {
		t.Errorf("metrics page lacks pulsar_function_received_total:\n%s", body)
	}
}
