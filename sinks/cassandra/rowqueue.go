package cassandra

import (
	"context"
	"sync"
)

// rowJob is one row of a started batch, waiting for a worker.
type rowJob struct {
	ctx   context.Context
	group *rowGroup
	batch *Pending
}

// rowQueue hands the rows of started batches to the Applier's workers. Any
// idle worker takes the oldest ready row, so every worker stays busy while
// rows wait; a row is ready only when no earlier job of the same row is
// queued or running, so two writes of one row never race and each row sees
// its batches in the order they were pushed.
type rowQueue struct {
	mu sync.Mutex
	// work is signalled when a job becomes ready or the queue is closed and
	// drained; room when a job finishes.
	work, room sync.Cond
	ready      []*rowJob
	// rows holds, per row, its pushed and unfinished jobs in push order:
	// the first is ready or running, the others wait behind it.
	rows   map[string][]*rowJob
	queued int // jobs in rows
	limit  int // push blocks while queued is at limit
	closed bool
}

func newRowQueue(limit int) *rowQueue {
	q := &rowQueue{rows: map[string][]*rowJob{}, limit: max(limit, 1)}
	q.work.L = &q.mu
	q.room.L = &q.mu
	return q
}

// push queues job behind the unfinished jobs of its row, blocking while
// limit jobs are queued. No job may be pushed after close.
func (q *rowQueue) push(job *rowJob) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.queued >= q.limit {
		q.room.Wait()
	}
	key := job.group.rowKey
	q.rows[key] = append(q.rows[key], job)
	q.queued++
	if len(q.rows[key]) == 1 {
		q.ready = append(q.ready, job)
		q.work.Signal()
	}
}

// take returns the oldest ready rows, at least one and at most n, each as
// a task: its ready job and the jobs waiting behind it, in push order, all
// of the first job's context (a row's later batches are folded into the
// same write). It waits for a ready row, and returns nil once the queue is
// closed and every job has finished.
func (q *rowQueue) take(n int) [][]*rowJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ready) == 0 {
		if q.closed && q.queued == 0 {
			return nil
		}
		q.work.Wait()
	}
	ctx := q.ready[0].ctx
	var tasks [][]*rowJob
	for len(tasks) < n && len(q.ready) > 0 && q.ready[0].ctx == ctx {
		jobs := q.rows[q.ready[0].group.rowKey]
		k := 1
		for k < len(jobs) && jobs[k].ctx == ctx {
			k++
		}
		tasks = append(tasks, jobs[:k:k])
		q.ready[0] = nil
		q.ready = q.ready[1:]
	}
	return tasks
}

// done marks a taken task finished, making the next job of its row ready.
func (q *rowQueue) done(task []*rowJob) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := task[0].group.rowKey
	waiting := q.rows[key][len(task):]
	if len(waiting) == 0 {
		delete(q.rows, key)
	} else {
		q.rows[key] = waiting
		q.ready = append(q.ready, waiting[0])
		q.work.Signal()
	}
	q.queued -= len(task)
	q.room.Broadcast()
	if q.closed && q.queued == 0 {
		q.work.Broadcast()
	}
}

// close lets the workers return once every pushed job has finished.
func (q *rowQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.work.Broadcast()
}
