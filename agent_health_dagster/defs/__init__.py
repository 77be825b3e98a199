"""The pieces of the code location: partitions, resources, per-suite asset factories, benchmark
assets, checks, sensors, schedules and jobs. `build.build_definitions` assembles them."""
