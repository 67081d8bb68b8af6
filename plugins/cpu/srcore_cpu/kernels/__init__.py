"""numpy kernels of srcore-cpu, one module per family; imported only when a model uses an op."""
