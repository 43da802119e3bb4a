-- fence_ok is fence that answers instead of raising: false when the generation is not the
-- session's current one. It takes the same lock on the lease row. Batched appends use it, so
-- that one refused append does not abort the others sharing its transaction.
CREATE FUNCTION fence_ok(p_session text, p_generation bigint) RETURNS boolean
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
	cur bigint;
BEGIN
	IF p_generation = 0 THEN
		RETURN true;
	END IF;
	SELECT generation INTO cur FROM leases WHERE session_id = p_session FOR NO KEY UPDATE;
	RETURN cur IS NOT DISTINCT FROM p_generation;
END
$$;
