"""The analysis core: op classes and their models, the procedure's steps, necessity, levers, routing.
It reads no file itself except through roofline.io, and imports nothing above it."""
