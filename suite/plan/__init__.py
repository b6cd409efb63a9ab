"""`make plan`: before renting, how long every stage takes on the GPU profile and what the hours cost (hours),
and the set-up minutes before the first stage and after the last (setup). Imported by suite.commands.plan,
suite.cluster (a sweep's seconds) and provisioning; it reads the stages' estimate().
"""
