"""ember's wheel variant provider: this machine's CUDA driver and GPUs, and the ember build for them."""
