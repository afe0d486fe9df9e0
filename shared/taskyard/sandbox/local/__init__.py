"""The local backend: the kernel under bubblewrap or `unshare` namespaces with rlimits, where no
Docker engine is reachable. Weaker isolation than a container, and it says so.

`provider` is the `SandboxProvider`, `launchers` how the kernel is started in namespaces,
`cgroups` a cgroup per sandbox where the machine allows, `kernel_copy` the kernel's source
copied where the sandbox user can read it.
"""
