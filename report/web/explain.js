// explain.html: placeholder
