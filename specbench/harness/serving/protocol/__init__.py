"""What the serving driver and its engine adapters share (`protocol.base`): the engine setting,
the conversations a batch runs and their results, one read of the engine's metrics, and the two
protocols an adapter implements (`Backend`, `EngineSession`)."""
