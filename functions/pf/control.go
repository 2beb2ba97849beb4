package pf

import (
	"context"
	"strconv"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/foldline/foldline/functions/pf/internal/instancepb"
)

// controlService answers the worker's proto.InstanceControl calls from stats.
type controlService struct {
	instancepb.UnimplementedInstanceControlServer
	s          *stats
	instanceID int
}

func exceptionList(l []exceptionInfo) []*instancepb.FunctionStatus_ExceptionInformation {
	out := make([]*instancepb.FunctionStatus_ExceptionInformation, len(l))
	for i, e := range l {
		out[i] = &instancepb.FunctionStatus_ExceptionInformation{ExceptionString: e.text, MsSinceEpoch: e.at.UnixMilli()}
	}
	return out
}

func (c *controlService) GetFunctionStatus(context.Context, *emptypb.Empty) (*instancepb.FunctionStatus, error) {
	s := c.s
	var failure string
	if why := s.notRunning.Load(); why != nil {
		failure = *why
	}
	return &instancepb.FunctionStatus{
		Running:                  failure == "",
		FailureException:         failure,
		NumReceived:              s.received.total.Load(),
		NumSuccessfullyProcessed: s.processed.total.Load(),
		NumUserExceptions:        s.exceptions[userException].total.Load(),
		LatestUserExceptions:     exceptionList(s.latestExceptions(userException)),
		NumSystemExceptions:      s.exceptions[systemException].total.Load(),
		LatestSystemExceptions:   exceptionList(s.latestExceptions(systemException)),
		NumSourceExceptions:      s.exceptions[sourceException].total.Load(),
		LatestSourceExceptions:   exceptionList(s.latestExceptions(sourceException)),
		NumSinkExceptions:        s.exceptions[sinkException].total.Load(),
		LatestSinkExceptions:     exceptionList(s.latestExceptions(sinkException)),
		AverageLatency:           s.latency.avgMs(),
		LastInvocationTime:       s.lastInvocationMs.Load(),
		InstanceId:               strconv.Itoa(c.instanceID),
	}, nil
}

func (c *controlService) metrics() *instancepb.MetricsData {
	s := c.s
	var sys, sys1 int64
	for _, k := range []exceptionKind{systemException, sourceException, sinkException} {
		sys += s.exceptions[k].total.Load()
		sys1 += s.exceptions[k].window()
	}
	return &instancepb.MetricsData{
		ReceivedTotal:                   s.received.total.Load(),
		ReceivedTotal_1Min:              s.received.window(),
		ProcessedSuccessfullyTotal:      s.processed.total.Load(),
		ProcessedSuccessfullyTotal_1Min: s.processed.window(),
		SystemExceptionsTotal:           sys,
		SystemExceptionsTotal_1Min:      sys1,
		UserExceptionsTotal:             s.exceptions[userException].total.Load(),
		UserExceptionsTotal_1Min:        s.exceptions[userException].window(),
		AvgProcessLatency:               s.latency.avgMs(),
		AvgProcessLatency_1Min:          s.latency.windowAvgMs(),
		LastInvocation:                  s.lastInvocationMs.Load(),
		UserMetrics:                     s.userMetricsCopy(),
	}
}

func (c *controlService) GetMetrics(context.Context, *emptypb.Empty) (*instancepb.MetricsData, error) {
	return c.metrics(), nil
}

func (c *controlService) GetAndResetMetrics(context.Context, *emptypb.Empty) (*instancepb.MetricsData, error) {
	m := c.metrics()
	c.s.resetWindow()
	return m, nil
}

// ResetMetrics starts a new one-minute window; totals stay true counts.
func (c *controlService) ResetMetrics(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	c.s.resetWindow()
	return &emptypb.Empty{}, nil
}

func (c *controlService) HealthCheck(context.Context, *emptypb.Empty) (*instancepb.HealthCheckResult, error) {
	return &instancepb.HealthCheckResult{Success: true}, nil
}
