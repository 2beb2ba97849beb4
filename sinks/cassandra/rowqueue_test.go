package cassandra

import (
	"fmt"
	"sync"
	"testing"
)

// TestRowQueueKeepsEachRowInOrder pushes several batches of rows, some on
// the same row, and checks that jobs of one row never overlap and run in
// push order (a task holding several of them in order), and that close lets
// the workers return once everything has run.
func TestRowQueueKeepsEachRowInOrder(t *testing.T) {
	q := newRowQueue(5) // smaller than the pushes, so push must block and resume
	const workers, rows, batches = 4, 3, 10
	var mu sync.Mutex
	running := map[string]bool{}
	seen := map[string][]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				tasks := q.take(2)
				if tasks == nil {
					return
				}
				mu.Lock()
				for _, task := range tasks {
					key := task[0].group.rowKey
					if running[key] {
						t.Errorf("row %s runs twice at once", key)
					}
					running[key] = true
					for _, job := range task {
						if job.group.rowKey != key {
							t.Errorf("a task of row %s holds a job of row %s", key, job.group.rowKey)
						}
						seen[key] = append(seen[key], job.group.ops[0].index)
					}
				}
				mu.Unlock()
				mu.Lock()
				for _, task := range tasks {
					delete(running, task[0].group.rowKey)
				}
				mu.Unlock()
				for _, task := range tasks {
					q.done(task)
				}
			}
		})
	}
	for b := range batches {
		for r := range rows {
			q.push(&rowJob{group: &rowGroup{rowKey: fmt.Sprint("row", r), ops: []boundOp{{index: b}}}})
		}
	}
	q.close()
	wg.Wait()
	for r := range rows {
		got := seen[fmt.Sprint("row", r)]
		if len(got) != batches {
			t.Fatalf("row%d ran %d jobs, want %d", r, len(got), batches)
		}
		for i, b := range got {
			if b != i {
				t.Fatalf("row%d ran its jobs in order %v", r, got)
			}
		}
	}
}
