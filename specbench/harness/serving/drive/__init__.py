"""`specbench run` on a serving engine.

- `drive.driver`: the driver both backends share (closed-loop batches, resume, env.json)
- `drive.open_driver`: the open-loop batches (`load.rates` / `load.trace`)
- `drive.engine_records`: the records a serving run writes, and reads back to know what is done
"""
