package metrics

import "github.com/prometheus/client_golang/prometheus"

// ExecutorStats are an executor process's figures since it started.
type ExecutorStats struct {
	MapTasks, ReduceTasks int64 // tasks that completed
	TaskFailures          int64
	RunningTasks          int
	ShuffleBytes          int64 // bytes this executor's map tasks pushed
	// StateRows are the rows in the state partitions this executor holds
	// (after each partition's last reduce task).
	StateRows  int64
	Registered bool
}

type executorCollector struct {
	stats                                                func() ExecutorStats
	tasks, failures, running, shuffle, state, registered *prometheus.Desc
}

// NewExecutorCollector returns the executor's collector; stats is read at
// scrape time.
func NewExecutorCollector(stats func() ExecutorStats) prometheus.Collector {
	return &executorCollector{
		stats:      stats,
		tasks:      prometheus.NewDesc("sluice_executor_tasks_total", "Tasks this executor completed, by kind (map, reduce).", []string{"kind"}, nil),
		failures:   prometheus.NewDesc("sluice_executor_task_failures_total", "Tasks this executor ran that failed.", nil, nil),
		running:    prometheus.NewDesc("sluice_executor_running_tasks", "Tasks running now.", nil, nil),
		shuffle:    prometheus.NewDesc("sluice_executor_shuffle_bytes_total", "Shuffle bytes this executor's map tasks pushed (to itself and to other executors).", nil, nil),
		state:      prometheus.NewDesc("sluice_executor_state_rows", "Rows in the state partitions this executor holds.", nil, nil),
		registered: prometheus.NewDesc("sluice_executor_registered", "1 while this executor is registered with a driver (its lease is valid), else 0.", nil, nil),
	}
}

func (c *executorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.tasks, c.failures, c.running, c.shuffle, c.state, c.registered} {
		ch <- d
	}
}

func (c *executorCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.CounterValue, float64(s.MapTasks), "map")
	ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.CounterValue, float64(s.ReduceTasks), "reduce")
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(s.TaskFailures))
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(s.RunningTasks))
	ch <- prometheus.MustNewConstMetric(c.shuffle, prometheus.CounterValue, float64(s.ShuffleBytes))
	ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, float64(s.StateRows))
	ch <- prometheus.MustNewConstMetric(c.registered, prometheus.GaugeValue, b2f(s.Registered))
}
