"""The scheduler at run time: cache, queue, cycles, binding, preemption, reports."""
