"""numpy kernels of backend ``quantized_cpu`` (imported only when a model uses them)."""
