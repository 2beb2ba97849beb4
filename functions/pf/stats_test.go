package pf

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/expfmt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/foldline/foldline/functions/pf/internal/instancepb"
)

// An exception whose text is invalid UTF-8 and huge (a handler quoting a
// binary input) once made the Prometheus client panic in the scrape's
// goroutine, which ended the instance. The metrics page, the status and the
// metrics of the control service must still be served, valid, with the
// text cut.
func TestMetricsSurviveHostileExceptionText(t *testing.T) {
	hostile := "bad input \xff\xfe " + strings.Repeat("é", 50_000) + "\xe2\x82"
	inst, _ := newTestInstance(t, testConf(), func(ctx context.Context, in []byte) ([]byte, error) {
		fc, _ := FromContext(ctx)
		fc.RecordMetric("size \xff"+strings.Repeat("m", 10_000), 1)
		return nil, Permanent(errors.New(hostile))
	})
	stop, err := inst.serve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := inst.process(t.Context(), ledgerEvent("x", 1), &fakeAcker{}); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get("http://" + inst.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	families, err := new(expfmt.TextParser).TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the metrics page is not valid exposition text: %v", err)
	}
	exception := families["pulsar_function_user_exception"]
	if exception == nil || len(exception.GetMetric()) != 1 {
		t.Fatalf("want one user_exception series, got %v", exception)
	}
	for _, l := range exception.GetMetric()[0].GetLabel() {
		if l.GetName() == "error" && (!utf8.ValidString(l.GetValue()) || len(l.GetValue()) > maxLabelBytes ||
			!strings.HasPrefix(l.GetValue(), "bad input \uFFFD é")) {
			t.Errorf("error label %q: want valid UTF-8 of at most %d bytes", l.GetValue(), maxLabelBytes)
		}
	}
	if families["pulsar_function_user_metric"] == nil {
		t.Error("the user metric is missing")
	}

	conn, err := grpc.NewClient(inst.controlAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	control := instancepb.NewInstanceControlClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	status, err := control.GetFunctionStatus(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if got := status.GetLatestUserExceptions(); len(got) != 1 || len(got[0].GetExceptionString()) > maxReasonBytes {
		t.Errorf("latest user exceptions %d, want one of at most %d bytes", len(got), maxReasonBytes)
	}
	if _, err := control.GetMetrics(ctx, &emptypb.Empty{}); err != nil {
		t.Errorf("metrics: %v", err)
	}
}
