"""Stage 2 of the flow: incident lifecycle, timeline, MTTR figures and postmortem export.

`states`, `timeline`, `mttr`, `views` and `postmortem` are pure; `lifecycle` and `reporting`
read and write through `storage`. Import the submodules directly (this package imports nothing).
"""
