"""Privacy deletion: the subject index, the deletion coordinator, the sweep of unnamed copies, the re-deletion after a restored backup."""
