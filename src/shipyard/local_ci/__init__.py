"""Running the generated workflows on this machine under act (`shipyard ci run`): the bare runner
images, what of the host they carry, act's files and command line, the job table, and one run end
to end (`workflow_run.py`). Generating the workflows is ci/'s; this package reads what it writes."""
