"""The method catalog: API method names, the engine estimators behind them, their parameters."""
