package metrics

// Process metric descriptions.
var (
	procCPU     = &Desc{Name: "process_cpu_seconds_total", Help: "User and system CPU time the process has used, in seconds.", Type: Counter}
	procRSS     = &Desc{Name: "process_resident_memory_bytes", Help: "Resident memory size of the process, in bytes.", Type: Gauge}
	procVirt    = &Desc{Name: "process_virtual_memory_bytes", Help: "Virtual memory size of the process, in bytes.", Type: Gauge}
	procOpenFDs = &Desc{Name: "process_open_fds", Help: "Open file descriptors of the process.", Type: Gauge}
	procMaxFDs  = &Desc{Name: "process_max_fds", Help: "Limit on open file descriptors of the process (soft RLIMIT_NOFILE).", Type: Gauge}
	procStart   = &Desc{Name: "process_start_time_seconds", Help: "Start time of the process, in seconds since the Unix epoch.", Type: Gauge}
)
