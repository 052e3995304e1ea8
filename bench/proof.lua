-- wrk script of bench/proof-bench.sh: every request carries the next DPoP proof of the file
-- named by PROOFS_FILE, one per line, so none is a replay. Once the proofs run out, requests
-- go without one and are refused (counted by wrk as non-2xx): the script then says so.
local proofs = {}
local next_proof = 0

init = function(args)
	for line in io.lines(os.getenv("PROOFS_FILE")) do
		proofs[#proofs + 1] = line
	end
end

request = function()
	next_proof = next_proof + 1
	local headers = {}
	for name, value in pairs(wrk.headers) do
		headers[name] = value
	end
	headers["DPoP"] = proofs[next_proof]
	return wrk.format(nil, nil, headers)
end
