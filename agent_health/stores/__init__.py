"""Result stores: where TestResults live between runs."""
