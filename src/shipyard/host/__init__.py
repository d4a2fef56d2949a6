"""This host: toolchains, base images, apt sources, doctor, source trees."""
