"""The pure core: values and maths. No I/O, no clock reads, no Textual, httpx, psutil or NVML."""
