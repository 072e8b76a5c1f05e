"""One module per step kind. Each `make_*_node(step, loaded)` returns a LangGraph node function
that reads state and `runtime.context` (Deps) and returns `{"steps": {step_id: output}}`.
Node code never catches broadly: failures propagate to `engine.running`."""
