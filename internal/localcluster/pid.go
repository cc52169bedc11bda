package localcluster

// PID returns the process id of the running child called name ("kube-apiserver",
// "database-apiserver", ControllerName, ...), or 0 when none runs. Benchmarks read its CPU time
// and resident memory from /proc/<pid>. The child is the leader of its own process group.
func (c *Cluster) PID(name string) int {
	if p := c.running(name); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}
