"""The docker backend: sandboxes in containers of the sandbox image, under runc or gVisor.

`provider` is the `SandboxProvider` (labels, hand-offs, clean-up), `spec` how a container is
made, `channel` the worker's attach to one container's kernel, `hosts` many sessions of one
tenant per container (the fork server's worker side). It needs the Docker SDK, from the
``service`` extra.
"""
