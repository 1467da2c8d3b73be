"""Privacy deletion: the subject index, the deletion coordinator and the sweep of unnamed copies."""
