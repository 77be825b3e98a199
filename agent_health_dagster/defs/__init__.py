"""The pieces of the code location: partitions, resources, per-suite asset factories, benchmark
assets, checks, sensors, schedules and jobs. `build.build_definitions` assembles them."""

__all__: list[str] = []  # built by `build.build_definitions`, not imported piecemeal
