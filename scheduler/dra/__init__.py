"""Dynamic Resource Allocation with structured parameters (``resource.k8s.io/v1``), as
kube-scheduler v1.36's DynamicResources plugin does it: the API objects
(``objects``), CEL device selectors (``cel_selectors``, ``cel_library``), the pools a
node sees and the node selector of an allocation (``pools``), the constraints
(``constraints``), the allocator (``allocator``), the plugin's PreFilter and Filter
for one pod (``node_filter``), a per-node view of free devices (``free_devices``) and
the objects the live scheduler knows, with its in-flight allocations (``catalog``).
Pure: nothing here talks to the API server; docs/dra.md says what is supported and
what is refused."""
